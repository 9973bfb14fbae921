package servercmd

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newAdminCmd(stdout, stderr io.Writer) *cobra.Command {
	admin := &cobra.Command{
		Use:   "admin",
		Short: "Administrative tasks on the server's database",
	}
	var config, dataDir, database string
	var executors []string
	recover := &cobra.Command{
		Use:   "recover --executor-id ID",
		Short: "Hand a dead worker's running deploys back to the queue",
		Long: `Hand the running (PENDING) deploys of a dead worker back to the deploy
queue, where a live worker resumes each from its last completed step.

Only for a worker that is gone for good: recovering a live worker's deploys
would run their current steps twice. A worker restarted with the same
executor id recovers its own deploys by itself.`,
		Example: `  manent-server admin recover --executor-id worker-2 --config /etc/manent/manent-server.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(executors) == 0 {
				return usageError{fmt.Errorf("--executor-id is required")}
			}
			cfg, err := loadConfig(config, map[string]string{"data_dir": dataDir, "database": database})
			if err != nil {
				return usageError{err}
			}
			cfg.ExecutorID = fmt.Sprintf("admin-%d", time.Now().UnixNano())
			rt, err := open(cmd.Context(), cfg, newLogger(stderr, "warn"))
			if err != nil {
				return err
			}
			defer rt.st.Close()
			defer rt.eng.Shutdown(5 * time.Second)
			ids, err := rt.eng.Recover(executors)
			if err != nil {
				return fmt.Errorf("recover: %w", err)
			}
			fmt.Fprintf(stdout, "%d deploy(s) of %v handed back to the queue\n", len(ids), executors)
			for _, id := range ids {
				fmt.Fprintln(stdout, id)
			}
			return nil
		},
	}
	f := recover.Flags()
	f.StringSliceVar(&executors, "executor-id", nil, "executor id of the dead worker (repeatable)")
	f.StringVar(&config, "config", "", "configuration file (manent-server.yaml)")
	f.StringVar(&dataDir, "data-dir", "", "data directory (default ./manent-data)")
	f.StringVar(&database, "database", "", "sqlite:<path> or postgres://…")
	admin.AddCommand(recover)
	return admin
}
