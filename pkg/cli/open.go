package cli

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
)

// OpenOptions are the inputs of `manent open` and `manent status --web`.
type OpenOptions struct {
	IO     *IOStreams
	Client func() (*api.Client, error)
	Getenv func(string) string

	ID string
}

// NewCmdOpen builds `manent open`.
func NewCmdOpen(f *Factory, runF func(*OpenOptions) error) *cobra.Command {
	opts := &OpenOptions{IO: f.IOStreams, Client: f.Client, Getenv: f.Getenv}
	return &cobra.Command{
		Use:   "open <id>",
		Short: "Print, and on a desktop open, the web page of a deploy",
		Long: `Print the URL of a deploy's page in the web UI of the server
(<server>/deployments/<id>) and, on a desktop, open it in the browser:
$BROWSER if set, else xdg-open (open on macOS). Without a desktop
(no DISPLAY or WAYLAND_DISPLAY on Linux) the URL is only printed.
Same as 'manent status <id> --web'.`,
		Example: `  manent open dpl_01JABCDEF`,
		Args:    idArg("deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return unknownDeploy(openRun(cmd.Context(), opts))
		},
	}
}

// WebURL is the page of deploy id in the web UI of server.
func WebURL(server, id string) string {
	return strings.TrimRight(server, "/") + "/deployments/" + url.PathEscape(id)
}

func openRun(ctx context.Context, opts *OpenOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	// The deploy must exist (and be readable): a wrong id fails here, with
	// the API's answer, not in the browser.
	d, err := client.Deployment(ctx, opts.ID)
	if err != nil {
		return err
	}
	u := WebURL(client.Server(), d.ID)
	fmt.Fprintln(opts.IO.Out, u)
	if err := openBrowser(u, opts.Getenv); err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "could not open a browser: %v\n", err)
	}
	return nil
}

// openBrowser opens u in the desktop's browser, when there is a desktop.
func openBrowser(u string, getenv func(string) string) error {
	var name string
	var args []string
	switch {
	case getenv("BROWSER") != "":
		f := strings.Fields(getenv("BROWSER"))
		name, args = f[0], f[1:]
	case runtime.GOOS == "darwin":
		name = "open"
	case runtime.GOOS == "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	case getenv("DISPLAY") != "" || getenv("WAYLAND_DISPLAY") != "":
		name = "xdg-open"
	default:
		return nil // no desktop: the printed URL is the answer
	}
	cmd := exec.Command(name, append(args, u)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
