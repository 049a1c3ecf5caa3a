package main

// fieldsV1Interned is set by the fieldsv1string build tag (as `make build`
// builds): managedFields documents are then held once per distinct
// document, which matters for the watch cache.
var fieldsV1Interned = false
