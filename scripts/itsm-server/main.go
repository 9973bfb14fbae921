// Command itsm-server runs manent's reference ITSM (pkg/itsm/reference) for
// local trials:
//
//	go run ./scripts/itsm-server -listen 127.0.0.1:9400
//	curl -X POST http://127.0.0.1:9400/changes/CHG0001/approve -d '{"by":"cab"}'
//
// It imports pkg/itsm/reference.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/manent-io/manent/pkg/itsm/reference"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9400", "address to listen on")
	flag.Parse()
	fmt.Printf("reference ITSM listening on http://%s\n", *listen)
	srv := &http.Server{Addr: *listen, Handler: reference.New(), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
