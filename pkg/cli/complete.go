package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// Completion from the server: deploy ids, applications, environments and
// schedule ids are asked of the configured server when the shell completes
// them (cobra's __complete). The server gets completeTimeout in all; when it
// cannot answer (not running, no token) nothing is offered, at once (no
// retries), and the shell does not fall back to file names.

// completeTimeout bounds the requests of one completion.
const completeTimeout = 2 * time.Second

// completeLimit is how many recent deploys are offered.
const completeLimit = 100

// registerServerCompletion attaches the server-backed completions to the
// commands of root that take deploy ids, applications, environments,
// schedule ids or cluster names. Commands are found by path, so each
// verb's file stays as it is.
func registerServerCompletion(root *cobra.Command, f *Factory) {
	find := func(path ...string) *cobra.Command {
		c, _, err := root.Find(path)
		if err != nil || c == root || c.Name() != path[len(path)-1] {
			return nil
		}
		return c
	}
	ids := map[string]func(manent.State) bool{
		"status": nil, "open": nil, "steps": nil, "logs": nil,
		"wait":    func(s manent.State) bool { return !s.Final() },
		"cancel":  func(s manent.State) bool { return !s.Final() },
		"approve": func(s manent.State) bool { return s == manent.StateAwaitingApproval },
		"reject":  func(s manent.State) bool { return s == manent.StateAwaitingApproval },
	}
	for name, keep := range ids {
		if c := find(name); c != nil && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completeDeployIDs(f, keep)
		}
	}
	for _, name := range []string{"history", "rollback"} {
		if c := find(name); c != nil && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completeAppEnvArgs(f)
		}
	}
	for _, name := range []string{"list", "dora"} {
		c := find(name)
		if c == nil {
			continue
		}
		if c.Flags().Lookup("application") != nil {
			_ = c.RegisterFlagCompletionFunc("application", completeAppEnvFlag(f, false))
		}
		if c.Flags().Lookup("environment") != nil {
			_ = c.RegisterFlagCompletionFunc("environment", completeAppEnvFlag(f, true))
		}
	}
	if c := find("schedules", "delete"); c != nil && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = completeSchedules(f)
	}
	if c := find("clusters", "status"); c != nil && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = completeClusters(f)
	}
}

// completion asks the server with a bounded context; any error means
// "nothing to offer".
func completion(cmd *cobra.Command, f *Factory, ask func(context.Context, *api.Client) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	cfg, err := f.Config()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	// A client of its own: no retries, the shell is waiting.
	client := api.NewClientWith(cfg.Server, cfg.Token, nil, api.Options{RequestTimeout: completeTimeout, Retries: -1})
	out, err := ask(ctx, client)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// candidate is one completion with its description ("value\tdescription"),
// both flattened and sanitised: they are the server's text.
func candidate(value, desc string) string {
	value = strings.ReplaceAll(cell(value), " ", "")
	if desc == "" {
		return value
	}
	return value + "\t" + cell(desc)
}

// completeDeployIDs offers the ids of recent deploys (newest first) that
// keep accepts (all when nil), described as "app/env version STATE".
func completeDeployIDs(f *Factory, keep func(manent.State) bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completion(cmd, f, func(ctx context.Context, c *api.Client) ([]string, error) {
			res, err := c.List(ctx, api.ListOptions{Limit: completeLimit})
			if err != nil {
				return nil, err
			}
			var out []string
			for _, d := range res.Items {
				if !strings.HasPrefix(d.ID, toComplete) || (keep != nil && !keep(d.State)) {
					continue
				}
				out = append(out, candidate(d.ID, d.Application+"/"+d.Environment+" "+d.Version+" "+string(d.State)))
			}
			return out, nil
		})
	}
}

// appEnvPairs returns the application/environment pairs the server knows:
// those of the inventory (every pair with a finished deploy), of the recent
// deploys (pairs whose first deploy is still running) and of the recurring
// schedules.
func appEnvPairs(ctx context.Context, c *api.Client) ([][2]string, error) {
	var pairs [][2]string
	seen := map[[2]string]bool{}
	add := func(app, env string) {
		p := [2]string{app, env}
		if !seen[p] {
			seen[p] = true
			pairs = append(pairs, p)
		}
	}
	inv, err := c.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range inv.Items {
		add(e.Application, e.Environment)
	}
	if res, err := c.List(ctx, api.ListOptions{Limit: completeLimit}); err == nil {
		for _, d := range res.Items {
			add(d.Application, d.Environment)
		}
	}
	if res, err := c.Schedules(ctx); err == nil {
		for _, s := range res.Items {
			if s.DeletedAt == nil {
				add(s.Application, s.Environment)
			}
		}
	}
	return pairs, nil
}

// distinct returns the sorted values of pairs[i][col] that start with prefix
// and, when only is set, whose other column equals only.
func distinct(pairs [][2]string, col int, only, prefix string) []string {
	var out []string
	for _, p := range pairs {
		if only != "" && p[1-col] != only {
			continue
		}
		if v := p[col]; strings.HasPrefix(v, prefix) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	for i, v := range out {
		out[i] = candidate(v, "")
	}
	return out
}

// completeAppEnvArgs completes `<application> <environment>`: the second
// argument offers the environments of the application given first.
func completeAppEnvArgs(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completion(cmd, f, func(ctx context.Context, c *api.Client) ([]string, error) {
			pairs, err := appEnvPairs(ctx, c)
			if err != nil {
				return nil, err
			}
			if len(args) == 0 {
				return distinct(pairs, 0, "", toComplete), nil
			}
			return distinct(pairs, 1, args[0], toComplete), nil
		})
	}
}

// completeAppEnvFlag completes --application (env false) or --environment
// (env true), narrowed by the other flag when it is set.
func completeAppEnvFlag(f *Factory, env bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		col, other := 0, "environment"
		if env {
			col, other = 1, "application"
		}
		only := ""
		if fl := cmd.Flags().Lookup(other); fl != nil {
			only = fl.Value.String()
		}
		return completion(cmd, f, func(ctx context.Context, c *api.Client) ([]string, error) {
			pairs, err := appEnvPairs(ctx, c)
			if err != nil {
				return nil, err
			}
			return distinct(pairs, col, only, toComplete), nil
		})
	}
}

// completeSchedules offers the ids of the recurring deploys.
func completeSchedules(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completion(cmd, f, func(ctx context.Context, c *api.Client) ([]string, error) {
			res, err := c.Schedules(ctx)
			if err != nil {
				return nil, err
			}
			var out []string
			for _, s := range res.Items {
				if s.DeletedAt != nil || !strings.HasPrefix(s.ID, toComplete) {
					continue
				}
				out = append(out, candidate(s.ID, s.Application+"/"+s.Environment+" "+s.Cron))
			}
			return out, nil
		})
	}
}

// completeClusters offers the names of the clusters that have reported.
func completeClusters(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completion(cmd, f, func(ctx context.Context, c *api.Client) ([]string, error) {
			res, err := c.Clusters(ctx)
			if err != nil {
				return nil, err
			}
			var out []string
			for _, cl := range res.Items {
				if strings.HasPrefix(cl.Cluster, toComplete) {
					out = append(out, candidate(cl.Cluster, fmt.Sprintf("%d pods, %d workloads", cl.Pods, cl.Workloads)))
				}
			}
			return out, nil
		})
	}
}
