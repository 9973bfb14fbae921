// Command manent is the manent CLI: it submits deploys to manent-server and
// follows them. Everything lives in pkg/cli.
//
// It imports pkg/cli.
package main

import (
	"os"

	"github.com/manent-io/manent/pkg/cli"
)

func main() { os.Exit(cli.Main()) }
