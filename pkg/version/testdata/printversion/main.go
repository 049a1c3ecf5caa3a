// Command printversion prints version.String for version_test.go, which
// builds it with and without -ldflags -X.
package main

import (
	"fmt"

	"github.com/nativejobset/jobset/pkg/version"
)

func main() {
	fmt.Println(version.String("printversion"))
}
