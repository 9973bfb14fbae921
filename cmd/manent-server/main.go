// Command manent-server runs the manent API and deploy workers.
package main

import (
	"os"

	"github.com/manent-io/manent/pkg/servercmd"
)

func main() { os.Exit(servercmd.Main()) }
