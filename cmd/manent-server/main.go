// Command manent-server runs the manent API and deploy workers.
//
// It imports pkg/servercmd and plugins/builtin (the built-in plugins),
// and Mozilla's root certificates as a fallback for a system without any
// (the image is FROM scratch): callbacks, OIDC and https artifacts verify
// TLS against them.
package main

import (
	"os"

	_ "golang.org/x/crypto/x509roots/fallback" // used only when the system has no roots

	"github.com/manent-io/manent/pkg/servercmd"
	"github.com/manent-io/manent/plugins/builtin"
)

func main() { os.Exit(servercmd.Main(builtin.Register)) }
