// Command manent-policy is `manent policy test`: it evaluates governance
// rules or a Rego policy against a table of cases. manent runs it for
// `manent policy test`. Everything lives in pkg/policycmd.
//
// It imports pkg/policycmd.
package main

import (
	"os"

	"github.com/manent-io/manent/pkg/policycmd"
)

func main() { os.Exit(policycmd.Main()) }
