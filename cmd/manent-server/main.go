// Command manent-server runs the manent API and deploy workers.
//
// It imports pkg/servercmd and plugins/builtin (the built-in plugins).
package main

import (
	"os"

	"github.com/manent-io/manent/pkg/servercmd"
	"github.com/manent-io/manent/plugins/builtin"
)

func main() { os.Exit(servercmd.Main(builtin.Register)) }
