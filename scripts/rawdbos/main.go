// Command rawdbos measures DBOS Transact alone, with none of manent: n
// workflows of 11 no-op steps (as many DBOS steps as a deploy runs) on one
// partitioned queue — 50 partitions, one workflow at a time per partition,
// 16 at once per worker, polled every 100 ms — exactly BenchmarkEngine's
// raw side, on DBOS's own database setup. It prints the rate and this
// process's CPU per workflow for each of -rounds rounds.
//
// Built in this module it runs the DBOS that manent ships (patched, see
// third_party/dbos-transact-golang/PATCHES.md); scripts/bench-dbos-stock.sh
// also builds it against DBOS v1.9.0 as released, to compare the two and
// manent with both:
//
//	go run ./scripts/rawdbos                               # SQLite, a new file
//	go run ./scripts/rawdbos -db postgres://…/postgres     # a new schema, dropped after
//
// It imports DBOS and pgx only: no package of manent's.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"
	"github.com/jackc/pgx/v5"
)

const steps = 11

func raw(ctx dbos.Context, n int) (int, error) {
	for i := 0; i < n; i++ {
		if _, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil }, dbos.WithStepName(fmt.Sprintf("noop-%d", i))); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// cpu is the CPU time this process has used, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	n := flag.Int("n", 500, "workflows per round")
	rounds := flag.Int("rounds", 3, "rounds")
	dbURL := flag.String("db", "", "PostgreSQL URL (a new schema is used, then dropped); empty: a new SQLite file")
	label := flag.String("label", "raw DBOS", "what to call the figures")
	flag.Parse()
	if err := run(*n, *rounds, *dbURL, *label); err != nil {
		fmt.Fprintln(os.Stderr, "rawdbos:", err)
		os.Exit(1)
	}
}

func run(n, rounds int, dbURL, label string) error {
	cfg := dbos.Config{AppName: "rawdbos", ApplicationVersion: "1",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	db := "SQLite"
	if dbURL == "" {
		dir, err := os.MkdirTemp("", "rawdbos")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.DatabaseURL = "sqlite:" + filepath.Join(dir, "dbos.db")
	} else {
		db = "PostgreSQL"
		cfg.DatabaseURL = dbURL
		cfg.DatabaseSchema = fmt.Sprintf("rawdbos_%d", time.Now().UnixNano())
		defer dropSchema(dbURL, cfg.DatabaseSchema)
	}
	ctx, err := dbos.NewContext(context.Background(), cfg)
	if err != nil {
		return err
	}
	q, err := dbos.RegisterQueue(ctx, "q", dbos.WithPartitionConcurrency(1), dbos.WithWorkerConcurrency(16),
		dbos.WithQueueBasePollingInterval(100*time.Millisecond))
	if err != nil {
		return err
	}
	dbos.RegisterWorkflow(ctx, raw, dbos.WithWorkflowName("raw"))
	if err := dbos.Launch(ctx); err != nil {
		return err
	}
	defer dbos.Shutdown(ctx, 5*time.Second)
	for r := 0; r < rounds; r++ {
		c0, start := cpu(), time.Now()
		hs := make([]dbos.WorkflowHandle[int], 0, n)
		for j := 0; j < n; j++ {
			h, err := dbos.RunWorkflow(ctx, raw, steps, dbos.WithQueue(q), dbos.WithQueuePartitionKey(fmt.Sprintf("env-%02d", j%50)))
			if err != nil {
				return err
			}
			hs = append(hs, h)
		}
		for _, h := range hs {
			if s, err := h.GetResult(dbos.WithHandlePollingInterval(20 * time.Millisecond)); err != nil || s != steps {
				return fmt.Errorf("workflow %s: %d steps, %v", h.GetWorkflowID(), s, err)
			}
		}
		el := time.Since(start)
		fmt.Printf("%s, %s, round %d: %d workflows of %d no-op steps, %.1f workflows/s, process CPU %.2f ms each\n",
			label, db, r+1, n, steps, float64(n)/el.Seconds(), float64(cpu()-c0)/float64(time.Millisecond)/float64(n))
	}
	return nil
}

// dropSchema removes the run's DBOS schema.
func dropSchema(url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawdbos: drop schema:", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Fprintln(os.Stderr, "rawdbos: drop schema:", err)
	}
}
