// Command example-external is an example external plugin: installed as
// manent-plugin-example on `plugins.path`, it speaks the manent.plugin/v1
// protocol of docs/plugins.md. It is self-contained on purpose (it imports
// nothing of manent): a plugin is any executable that reads one JSON
// request on stdin and writes one JSON response on stdout.
//
// It "deploys" into a directory, like the built-in local plugin but with
// marker files only:
//
//	<dir>/releases/<version>   written by deploy, removed by rollback:deploy
//	<dir>/current              the live version, written by activate
//	<dir>/actions.log          one line per action: "<action> <deploy id> <version> <step>"
//
// with:
//
//	dir: /abs/path            required
//	fail: <action>            answer that action with ok=false
//	permanent: true           … and mark the failure permanent
//	crash: <action>           exit 3 without a response
//	hang: <action>            never answer (until killed)
//	garbage: <action>         write something that is not JSON
//
// It imports nothing of this module: an external plugin speaks the protocol
// on its stdin and stdout.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type request struct {
	Protocol string `json:"protocol"`
	Action   string `json:"action"`
	Context  struct {
		DeployID string `json:"deploy_id"`
		Version  string `json:"version"`
		Step     string `json:"step"`
	} `json:"context"`
	With       map[string]any  `json:"with"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

type response struct {
	OK        bool           `json:"ok"`
	Output    map[string]any `json:"output,omitempty"`
	Error     string         `json:"error,omitempty"`
	Permanent bool           `json:"permanent,omitempty"`
	// Settings: in a refused validate, each setting of `with` at fault,
	// which admission (and `manent validate`) reports at its own place.
	Settings []setting `json:"settings,omitempty"`
}

type setting struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		answer(response{Error: "bad request: " + err.Error(), Permanent: true})
		return
	}
	if req.Protocol != "manent.plugin/v1" {
		answer(response{Error: fmt.Sprintf("unsupported protocol %q", req.Protocol), Permanent: true})
		return
	}
	fmt.Fprintf(os.Stderr, "example: %s for %s\n", req.Action, req.Context.DeployID)
	answer(handle(req))
}

func answer(r response) {
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func str(with map[string]any, key string) string {
	s, _ := with[key].(string)
	return s
}

func handle(req request) response {
	with := req.With
	switch req.Action {
	case str(with, "crash"):
		fmt.Fprintln(os.Stderr, "example: crashing as asked")
		os.Exit(3)
	case str(with, "hang"):
		time.Sleep(time.Hour)
	case str(with, "garbage"):
		fmt.Println("this is not JSON")
		os.Exit(0)
	case str(with, "fail"):
		return response{Error: req.Action + " failed as asked", Permanent: with["permanent"] == true}
	}
	dir := str(with, "dir")
	if req.Action == "validate" {
		if !filepath.IsAbs(dir) {
			return response{Error: "with.dir must be an absolute path", Permanent: true,
				Settings: []setting{{Path: "dir", Error: "with.dir must be an absolute path"}}}
		}
		return response{OK: true}
	}
	if !filepath.IsAbs(dir) {
		return response{Error: "with.dir must be an absolute path", Permanent: true}
	}
	if err := logAction(dir, req); err != nil {
		return response{Error: err.Error()}
	}
	release := filepath.Join(dir, "releases", safe(req.Context.Version))
	current := filepath.Join(dir, "current")
	switch req.Action {
	case "live":
		live, err := readOptional(current)
		if err != nil {
			return response{Error: err.Error()}
		}
		return response{OK: true, Output: map[string]any{"release": live}}
	case "deploy":
		if err := write(release, req.Context.DeployID); err != nil {
			return response{Error: err.Error()}
		}
		return response{OK: true, Output: map[string]any{"release": req.Context.Version}}
	case "activate":
		if _, err := os.Stat(release); err != nil {
			return response{Error: "release " + req.Context.Version + " is not deployed", Permanent: true}
		}
		if err := write(current, req.Context.Version); err != nil {
			return response{Error: err.Error()}
		}
		return response{OK: true, Output: map[string]any{"current": req.Context.Version}}
	case "health":
		if _, err := os.Stat(release); err != nil {
			return response{Error: "release " + req.Context.Version + " is not deployed"}
		}
		return response{OK: true, Output: map[string]any{"healthy": true}}
	case "rollback:activation":
		var cp struct {
			Release string `json:"release"`
		}
		if len(req.Checkpoint) > 0 {
			if err := json.Unmarshal(req.Checkpoint, &cp); err != nil {
				return response{Error: "bad checkpoint: " + err.Error(), Permanent: true}
			}
		}
		if cp.Release == "" {
			if err := os.Remove(current); err != nil && !errors.Is(err, os.ErrNotExist) {
				return response{Error: err.Error()}
			}
		} else if err := write(current, cp.Release); err != nil {
			return response{Error: err.Error()}
		}
		return response{OK: true, Output: map[string]any{"current": cp.Release}}
	case "rollback:deploy":
		live, _ := readOptional(current)
		if live == req.Context.Version {
			return response{OK: true, Output: map[string]any{"removed": ""}}
		}
		if err := os.Remove(release); err != nil && !errors.Is(err, os.ErrNotExist) {
			return response{Error: err.Error()}
		}
		return response{OK: true, Output: map[string]any{"removed": req.Context.Version}}
	case "run":
		marker := filepath.Join(dir, "ran-"+safe(req.Context.Step))
		if err := write(marker, req.Context.DeployID); err != nil {
			return response{Error: err.Error()}
		}
		return response{OK: true, Output: map[string]any{"marker": marker}}
	}
	return response{Error: "unknown action " + req.Action, Permanent: true}
}

func logAction(dir string, req request) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "actions.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s %s %s\n", req.Action, req.Context.DeployID, req.Context.Version, req.Context.Step)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// write replaces path's content atomically.
func write(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readOptional(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 || r == ':' {
			return '_'
		}
		return r
	}, strings.TrimLeft(s, "."))
}
