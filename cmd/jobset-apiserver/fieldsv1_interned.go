//go:build fieldsv1string

package main

func init() { fieldsV1Interned = true }
