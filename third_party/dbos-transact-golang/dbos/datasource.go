package dbos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos/internal/models"
	"github.com/dbos-inc/dbos-transact-golang/dbos/internal/sysdb"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// datasource.go: user-provided data sources (transactions).
//
// A DataSource wraps a database engine the user already owns (a *pgxpool.Pool
// or a *sql.DB) so a single transaction can write BOTH application tables AND a
// DBOS durability record. That record lives in a `transaction_completion` table
// in the USER's database.

const transactionCompletionTable = "transaction_completion"

const defaultDataSourceName = "datasource"

// DataSource is a handle to a user-provided database engine. It is returned by
// NewDataSource and passed to RunAsTransaction.
type DataSource struct {
	name    string
	pool    Pool
	dialect Dialect
	schema  string

	// True when the engine is the system database itself, in which case
	// RunAsTransaction collapses onto the single system transaction and there is
	// no separate transaction_completion table to maintain.
	sharesSystemDB bool

	// Verify the schema on setup instead of migrating it.
	skipMigrations bool

	// Guard setup (dialect resolution + schema migration).
	setupMu   sync.Mutex
	setupDone bool
}

// Name returns the data source's name (WithDataSourceName, default "datasource").
func (ds *DataSource) Name() string { return ds.name }

type dataSourceOptions struct {
	name           string
	schema         string
	skipMigrations bool
}

// DataSourceOption configures a data source.
type DataSourceOption func(*dataSourceOptions)

// WithDataSourceName sets the data source's name (default "datasource"). It is
// used only in logs and error messages; names need not be unique.
func WithDataSourceName(name string) DataSourceOption {
	return func(o *dataSourceOptions) { o.name = name }
}

// WithDataSourceSchema overrides the schema that holds the transaction_completion
// table (default "dbos"). Ignored by SQLite, which has no schemas.
func WithDataSourceSchema(schema string) DataSourceOption {
	return func(o *dataSourceOptions) { o.schema = schema }
}

// WithDataSourceSkipMigrations verifies the data source schema instead of
// creating and migrating it.
func WithDataSourceSkipMigrations() DataSourceOption {
	return func(o *dataSourceOptions) { o.skipMigrations = true }
}

// Engine is the set of database engine types that can back a DataSource:
// *pgxpool.Pool (Postgres/CockroachDB) or *sql.DB (SQLite). It is a generic
// constraint, not an ordinary type, so NewDataSource rejects any other
// engine type at compile time rather than at runtime.
type Engine interface {
	*pgxpool.Pool | *sql.DB
}

// NewDataSource builds a durable data source over a user-provided database engine
// so its transactions can be made durable via RunAsTransaction. The engine type
// is constrained to *pgxpool.Pool (Postgres/CockroachDB) or *sql.DB (SQLite).
//
// The returned handle is ready to use immediately: NewDataSource detects whether
// the engine is the DBOS system database, resolves the dialect (CockroachDB), and
// migrates the data source schema, creating the transaction_completion table if
// it does not already exist.
//
// On a Context created with NewContext, NewDataSource must be called before Launch.
//
// Example:
//
//	pool, _ := pgxpool.New(ctx, appDatabaseURL)
//	ds, err := dbos.NewDataSource(ctx, pool, dbos.WithDataSourceName("app"))
func NewDataSource[E Engine](ctx Client, engine E, opts ...DataSourceOption) (*DataSource, error) {
	if ctx == nil {
		return nil, errors.New("ctx cannot be nil")
	}
	c, ok := ctx.(*dbosContext)
	if !ok {
		return nil, errors.New("NewDataSource requires a concrete DBOS context")
	}
	if !c.config.isClient && c.launched.Load() {
		return nil, errors.New("NewDataSource must be called before Launch")
	}

	options := dataSourceOptions{name: defaultDataSourceName, schema: _DEFAULT_SYSTEM_DB_SCHEMA}
	for _, opt := range opts {
		opt(&options)
	}
	if options.name == "" {
		options.name = defaultDataSourceName
	}

	var (
		pool    Pool
		dialect Dialect
	)
	switch e := any(engine).(type) {
	case *pgxpool.Pool:
		if e == nil {
			return nil, errors.New("data source engine (*pgxpool.Pool) is nil")
		}
		pool = sysdb.NewPgxPool(e)
		dialect = sysdb.PostgresDialect{} // resolve CRDB below
	case *sql.DB:
		if e == nil {
			return nil, errors.New("data source engine (*sql.DB) is nil")
		}
		pool = sysdb.NewSQLPool(e)
		dialect = sysdb.SqliteDialect{}
	}

	ds := &DataSource{
		name:           options.name,
		pool:           pool,
		dialect:        dialect,
		schema:         options.schema,
		skipMigrations: options.skipMigrations,
	}

	// A data source whose pool is the very same engine as this context's system
	// database needs no durability table: RunAsTransaction collapses onto the
	// single system transaction (runAsTxn), so defer dialect resolution and
	// table creation until the source is used with a different system database.
	if sysdb.SameEngine(ds.pool, c.systemDB.Pool()) {
		c.logger.Debug("Data source shares the system database; using single-transaction durability", "datasource", ds.name)
		ds.sharesSystemDB = true
	} else if err := ds.setup(c); err != nil {
		return nil, fmt.Errorf("data source %q: %w", ds.name, err)
	}
	if !c.config.isClient {
		c.registerDataSource(ds)
	}
	return ds, nil
}

// setup resolves the dialect and migrates the data source schema, or verifies
// it under WithDataSourceSkipMigrations.
func (ds *DataSource) setup(c *dbosContext) error {
	ds.setupMu.Lock()
	defer ds.setupMu.Unlock()
	if ds.setupDone {
		return nil
	}
	dialect, err := resolvePoolDialect(c, ds.pool, ds.dialect, c.logger)
	if err != nil {
		return err
	}
	ds.dialect = dialect
	if ds.skipMigrations {
		if err := verifyDataSource(c, ds.pool, ds.dialect, ds.schema, ds.name); err != nil {
			return err
		}
	} else if err := ds.migrateSchema(c); err != nil {
		return err
	}
	ds.setupDone = true
	c.logger.Debug("Created data source", "datasource", ds.name, "dialect", ds.dialect.Name(), "schema", ds.schema)
	return nil
}

// qualifiedCompletionTable returns the schema-qualified transaction_completion
// table name for this data source's dialect (e.g. `"dbos".transaction_completion`
// for Postgres, `transaction_completion` for SQLite).
func (ds *DataSource) qualifiedCompletionTable() string {
	return ds.dialect.SchemaPrefix(ds.schema) + transactionCompletionTable
}

// resolvePoolDialect refines a Postgres dialect to CockroachDB when the pool is
// actually CRDB. The two are wire-compatible and share postgresDialect for
// everything a data source needs, so this only keeps the dialect Name accurate
// (for logs) and future-proofs any later divergence. No-op for *sql.DB
// (SQLite), whose dialect is already final.
func resolvePoolDialect(ctx context.Context, pool Pool, dialect Dialect, logger *slog.Logger) (Dialect, error) {
	pgxPool := PgxPool(pool)
	if pgxPool == nil {
		return dialect, nil
	}
	crdb, err := sysdb.RetryWithResult(ctx, func() (bool, error) {
		conn, err := pgxPool.Acquire(ctx)
		if err != nil {
			return false, err
		}
		defer conn.Release()
		return sysdb.IsCockroachDB(conn.Conn()), nil
	}, sysdb.WithRetrierLogger(logger))
	if err != nil {
		return nil, err
	}
	if crdb {
		return sysdb.CockroachDialect{}, nil
	}
	return dialect, nil
}

// migrateSchema migrates the data source schema, which creates the
// transaction_completion table (and, for Postgres, its schema) when missing.
// A schema already at the current version needs no DDL, so a role with only
// DML privileges works against a schema migrated ahead of time.
func (ds *DataSource) migrateSchema(c *dbosContext) error {
	if err := migrateDataSource(c, ds.pool, ds.dialect, ds.schema, c.logger); err != nil {
		return fmt.Errorf("migrating the data source schema: %w; "+
			"migrate it ahead of time with a privileged role (dbos.MigrateDataSource) "+
			"or ensure the connecting role has CREATE privileges on the database and schema", err)
	}
	return nil
}

// resolveUserTx adapts a caller-owned transaction to the portable Tx the system
// database writes through. It accepts a Tx (as handed to a RunAsTransaction
// callback), a pgx.Tx, or a *sql.Tx.
func resolveUserTx(tx any) (Tx, error) {
	switch t := tx.(type) {
	case Tx:
		if t != nil {
			return t, nil
		}
	case pgx.Tx:
		if t != nil {
			return sysdb.NewPgxTx(t), nil
		}
	case *sql.Tx:
		if t != nil {
			return sysdb.NewSQLTx(t), nil
		}
	case nil:
	default:
		return nil, models.NewInvalidOptionError(fmt.Sprintf("unsupported transaction type %T: expected pgx.Tx, *sql.Tx or dbos.Tx", tx))
	}
	return nil, models.NewInvalidOptionError("transaction cannot be nil")
}

// completionRecord is a row from the transaction_completion table. A success row
// stores output (error nil); a permanently failed transaction stores a serialized
// error (output nil) written in a standalone insert after fn's transaction rolls
// back. Failures are also checkpointed (best effort) in the system database's operation_outputs.
type completionRecord struct {
	output        *string
	errStr        *string
	serialization string
}

// checkCompletion reads the durability row for (workflowID, stepID), or returns
// (nil, nil) when none exists.
func (ds *DataSource) checkCompletion(ctx context.Context, q Querier, workflowID string, stepID int) (*completionRecord, error) {
	query := ds.dialect.RewriteQuery(fmt.Sprintf(
		`SELECT output, error, serialization FROM %s WHERE workflow_id = $1 AND step_id = $2`, ds.qualifiedCompletionTable()))
	var (
		rec           completionRecord
		serialization *string
	)
	if err := q.QueryRow(ctx, query, workflowID, stepID).Scan(&rec.output, &rec.errStr, &serialization); err != nil {
		if errors.Is(err, ErrNoRows) {
			return nil, nil
		}
		return nil, err
	}
	if serialization != nil {
		rec.serialization = *serialization
	}
	return &rec, nil
}

// Used by RewindWorkflow. No-op when the datasource == the system database
func (ds *DataSource) deleteCheckpoints(ctx context.Context, workflowID string, startStep int) error {
	if ds.sharesSystemDB {
		return nil
	}
	query := ds.dialect.RewriteQuery(fmt.Sprintf(
		`DELETE FROM %s WHERE workflow_id = $1 AND step_id >= $2`, ds.qualifiedCompletionTable()))
	if _, err := ds.pool.Exec(ctx, query, workflowID, startStep); err != nil {
		return fmt.Errorf("data source %q: failed to delete checkpoints for workflow %s: %w", ds.name, workflowID, err)
	}
	return nil
}

var errCompletionRecorded = errors.New("transaction completion already recorded")

// checkpointWorkflowID is the ID a step's checkpoint row carries in a data source: the
// workflow's, prefixed by its shard key on a sharded system database ("<len>:<key>:<id>",
// as every DBOS SDK writes it), since a workflow ID is unique only within its key.
func checkpointWorkflowID(state *workflowState) string {
	return sysdb.KeyedID(state.shardKey, state.workflowID)
}

// recordCompletion writes the durability row for (workflowID, stepID).
// A duplicate row surfaces as errCompletionRecorded.
func (ds *DataSource) recordCompletion(ctx context.Context, q Querier, workflowID string, stepID int, output, errStr *string, serialization string) error {
	query := ds.dialect.RewriteQuery(fmt.Sprintf(
		`INSERT INTO %s (workflow_id, step_id, output, error, serialization, created_at) VALUES ($1, $2, $3, $4, $5, %s)`,
		ds.qualifiedCompletionTable(), ds.dialect.NowMsSQL()))
	if _, err := q.Exec(ctx, query, workflowID, stepID, output, errStr, serialization); err != nil {
		if ds.dialect.IsUniqueViolation(err) {
			return errCompletionRecorded
		}
		return err
	}
	return nil
}

// RunAsTransaction durably executes fn as a transaction against the data source
// ds. fn receives a portable Tx; within it the application can write its own
// tables and DBOS atomically records a durability row, so the step runs
// exactly once even across crashes and recovery.
//
// It must be called from within a workflow. Standard StepOptions apply
// (WithStepName, WithStepMaxRetries, retry predicate).
//
// Example:
//
//	n, err := dbos.RunAsTransaction(ctx, ds, func(ctx context.Context, tx dbos.Tx) (int64, error) {
//	    res, err := tx.Exec(ctx, "INSERT INTO orders(item) VALUES ($1)", item)
//	    if err != nil {
//	        return 0, err
//	    }
//	    return res.RowsAffected()
//	})
func RunAsTransaction[R any](ctx Context, ds *DataSource, fn Txn[R], opts ...StepOption) (R, error) {
	if ctx == nil {
		return *new(R), models.NewStepExecutionError("", "", fmt.Errorf("ctx cannot be nil"))
	}
	if ds == nil {
		return *new(R), models.NewStepExecutionError("", "", fmt.Errorf("data source cannot be nil"))
	}
	if fn == nil {
		return *new(R), models.NewStepExecutionError("", "", fmt.Errorf("transaction function cannot be nil"))
	}

	stepName := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	opts = append(opts, WithStepName(stepName))

	typeErasedFn := TxnFunc(func(ctx context.Context, tx Tx) (any, error) { return fn(ctx, tx) })

	result, err := ctx.RunAsTransaction(ctx, ds, typeErasedFn, opts...)
	if result == nil {
		return *new(R), err
	}
	typedResult, convertErr := convertStepResult[R](ctx, result)
	if convertErr != nil {
		return *new(R), convertErr
	}
	return typedResult, err
}

// RunAsTransaction splits durability across two databases: txn1 (the user pool) atomically
// commits the application writes plus a transaction_completion row; txn2 (the
// system pool) checkpoints operation_outputs. Recovery checks operation_outputs
// first (layer 1) then transaction_completion (layer 2), replaying the stored
// output without re-running fn when the user transaction already committed.
//
// When the data source shares the system database's pool, the call collapses onto runAsTxn.
func (c *dbosContext) RunAsTransaction(dbosCtx Context, ds *DataSource, fn TxnFunc, opts ...StepOption) (any, error) {
	if ws, ok := c.Value(workflowStateKey).(*workflowState); ok && ws != nil && (ws.isWithinTransaction || ws.isWithinStep) {
		stepOpts := &stepOptions{}
		for _, opt := range opts {
			opt(stepOpts)
		}
		enclosing := "a step"
		if ws.isWithinTransaction {
			enclosing = "a transaction"
		}
		return nil, models.NewStepExecutionError(ws.workflowID, stepOpts.stepName, fmt.Errorf("cannot call RunAsTransaction within %s", enclosing))
	}

	if sysdb.SameEngine(ds.pool, c.systemDB.Pool()) {
		// runAsTxn manages a transaction for the user function.
		// reuse our internal path used for all DBOS "special" steps (e.g., setEvent)
		return c.runAsTxn(dbosCtx, fn, opts...)
	}

	prep, err := prepareStepExecution(c, opts)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, models.NewStepExecutionError(prep.WorkflowID, prep.StepOpts.stepName, fmt.Errorf("transaction function cannot be nil"))
	}
	if err := ds.setup(c); err != nil {
		return nil, models.NewStepExecutionError(prep.WorkflowID, prep.StepOpts.stepName, fmt.Errorf("data source %q: %w", ds.name, err))
	}

	uncancellableCtx := WithoutCancel(c)
	stepState := prep.StepState
	stepState.isWithinTransaction = true
	stepOpts := prep.StepOpts
	stepCtx := WithValue(c, workflowStateKey, stepState)
	ser := resolveEncoder(c)

	stepStartTime := time.Now()

	// checkpoint writes the step outcome into the system database (txn2). The
	// user transaction has already committed durably, so this is retried hard.
	checkpoint := func(encodedOutput, serializedErr *string, serialization string, startedAt time.Time) error {
		dbInput := sysdb.RecordOperationResultDBInput{
			WorkflowID:    stepState.workflowID,
			StepName:      stepOpts.stepName,
			StepID:        stepState.stepID,
			Output:        encodedOutput,
			ErrStr:        serializedErr,
			StartedAt:     startedAt,
			CompletedAt:   time.Now(),
			Serialization: serialization,
			OwnerXID:      stepState.ownerXID,
		}
		return sysdb.Retry(c, func() error {
			return c.systemDB.RecordOperationResult(uncancellableCtx, dbInput)
		}, sysdb.WithRetrierLogger(c.logger))
	}

	// Layer 1: already checkpointed in the system database? Replay it.
	recordedOutput, err := sysdb.RetryWithResult(c, func() (*sysdb.RecordedResult, error) {
		return c.systemDB.CheckOperationExecution(uncancellableCtx, sysdb.CheckOperationExecutionDBInput{
			WorkflowID: stepState.workflowID,
			StepID:     stepState.stepID,
			StepName:   stepOpts.stepName,
		})
	}, sysdb.WithRetrierLogger(c.logger))
	if err != nil {
		return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("checking operation execution: %w", err))
	}
	if recordedOutput != nil {
		return stepCheckpointedOutcome{value: recordedOutput.Output, serialization: recordedOutput.Serialization},
			deserializeWorkflowError(recordedOutput.ErrStr)
	}

	// Layer 2: did the user transaction commit on a previous run (crash window
	// between txn1 and txn2)? Replay the stored output and apply txn2 without
	// re-running fn.
	completion, err := sysdb.RetryWithResult(c, func() (*completionRecord, error) {
		return ds.checkCompletion(uncancellableCtx, ds.pool, checkpointWorkflowID(stepState), stepState.stepID)
	}, sysdb.WithRetrierLogger(c.logger))
	if err != nil {
		return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("checking transaction completion: %w", err))
	}
	replayCompletion := func(completion *completionRecord) (any, error) {
		// Replay with the codec the row was written with, not the current one.
		replaySer := completion.serialization
		if replaySer == "" {
			replaySer = ser.Name()
		}
		if cerr := checkpoint(completion.output, completion.errStr, replaySer, stepStartTime); cerr != nil {
			return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, cerr)
		}
		return stepCheckpointedOutcome{value: completion.output, serialization: replaySer},
			deserializeWorkflowError(completion.errStr)
	}
	if completion != nil {
		return replayCompletion(completion)
	}

	stillOwns := func() error {
		owner, err := sysdb.RetryWithResult(c, func() (*string, error) {
			return c.systemDB.GetWorkflowOwner(uncancellableCtx, stepState.workflowID)
		}, sysdb.WithRetrierLogger(c.logger))
		if err != nil {
			return models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("checking workflow owner: %w", err))
		}
		if owner == nil || *owner != stepState.ownerXID {
			return models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, models.NewWorkflowConflictIDError(stepState.workflowID))
		}
		return nil
	}

	resolveRecordedCompletion := func() (any, error) {
		if err := stillOwns(); err != nil {
			return nil, err
		}
		completion, err := sysdb.RetryWithResult(c, func() (*completionRecord, error) {
			return ds.checkCompletion(uncancellableCtx, ds.pool, checkpointWorkflowID(stepState), stepState.stepID)
		}, sysdb.WithRetrierLogger(c.logger))
		if err != nil {
			return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("checking transaction completion: %w", err))
		}
		// This should only happen if the user deleted the row, or during a weird rewind race
		if completion == nil {
			return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("%w, but no row was found", errCompletionRecorded))
		}
		return replayCompletion(completion)
	}

	// Fresh execution.
	txOpts := TxOptions{IsoLevel: IsoLevelReadCommitted}
	if stepOpts.txIsoLevel != nil {
		txOpts.IsoLevel = *stepOpts.txIsoLevel
	}
	stepStartTime = time.Now()

	// runTxnOnce is one fresh-transaction attempt against the user database: run
	// fn, record the completion row, and commit — all atomic. A fresh tx is
	// begun on every (retried) call so a closed/aborted tx never leaks.
	runTxnOnce := func() (any, error) {
		tx, err := ds.pool.BeginTx(uncancellableCtx, txOpts)
		if err != nil {
			return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("failed to begin transaction: %w", err))
		}
		defer tx.Rollback(uncancellableCtx)

		output, txErr := fn(stepCtx, tx)
		if txErr != nil {
			return nil, txErr
		}

		encoded, serErr := ser.Encode(output)
		if serErr != nil {
			return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("failed to serialize transaction output: %w", serErr))
		}
		if recErr := ds.recordCompletion(uncancellableCtx, tx, checkpointWorkflowID(stepState), stepState.stepID, encoded, nil, ser.Name()); recErr != nil {
			return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("recording transaction completion: %w", recErr))
		}
		if err := stillOwns(); err != nil {
			return nil, err
		}
		// We might still lose ownership between the previous read and the commit
		// The later, owning writer will adopt our write.
		// Still correct because fn must be deterministic.
		if cmErr := tx.Commit(uncancellableCtx); cmErr != nil {
			return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("failed to commit transaction: %w", cmErr))
		}
		return output, nil
	}

	// INNER: absorb infrastructure errors (dropped connections, closed tx) and
	// transaction conflicts (serialization/deadlock), retrying with a fresh tx
	// indefinitely. Application errors are non-retryable here and pass straight
	// through to the user retry policy below — so connection retries never burn
	// the user's maxRetries budget (no compounding).
	runTxnResilient := func() (any, error) {
		return sysdb.RetryWithResult(c, runTxnOnce, sysdb.WithRetrierLogger(c.logger), sysdb.WithRetryCondition(ds.dialect.IsRetryableTransaction))
	}

	// OUTER: the user-facing step retry policy (maxRetries + predicate).
	stepOutput, stepError := executeStepWithRetry(c, stepState.workflowID, stepOpts, runTxnResilient)

	// The workflow being cancelled mid-step interrupts the step, whatever its
	// outcome: nothing is checkpointed, so a resume re-executes the step.
	if isWorkflowCtxCancelled(stepState) {
		return stepOutput, interruptedStepError(stepState, stepError)
	}
	// The workflow changed hands before txn1 committed. We rolled back and, now, park.
	if errors.Is(stepError, ErrConflictingWorkflowID) {
		return nil, stepError
	}

	// txn2: checkpoint the outcome into the system database.
	encodedStepOutput, serErr := ser.Encode(stepOutput)
	if serErr != nil {
		return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, fmt.Errorf("failed to serialize transaction output: %w", serErr))
	}
	var serializedErr *string
	if stepError != nil && !errors.Is(stepError, errCompletionRecorded) {
		s := serializeWorkflowError(c.logger, stepError, ser.Name())
		serializedErr = &s
	}

	// Mirror the failure into the user database so the user's own database is self-describing.
	// fn's transaction rolled back, so this is a separate transaction on the pool,
	// written before the system-DB checkpoint to keep the layer-1-then-layer-2 recovery order.
	// Like txn1, it commits only while this execution owns the workflow.
	// Best-effort, except that a row recorded meanwhile wins over the failure,
	// and losing ownership parks the execution.
	// This refers to non-conflict errors only
	// A serialization failure or deadlock aborts the transaction: retry it with a fresh one, as runTxnResilient does.
	if serializedErr != nil {
		if recErr := sysdb.Retry(c, func() error {
			tx, err := ds.pool.BeginTx(uncancellableCtx, TxOptions{})
			if err != nil {
				return err
			}
			defer tx.Rollback(uncancellableCtx)
			if err := ds.recordCompletion(uncancellableCtx, tx, checkpointWorkflowID(stepState), stepState.stepID, nil, serializedErr, ser.Name()); err != nil {
				return err
			}
			// Holding this step's row, so a later owner's insert waits on our commit.
			// Note there's still an unavoidable, short gap between reading ownership and committing.
			if err := stillOwns(); err != nil {
				return err
			}
			return tx.Commit(uncancellableCtx)
		}, sysdb.WithRetrierLogger(c.logger), sysdb.WithRetryCondition(ds.dialect.IsRetryableTransaction)); recErr != nil {
			if errors.Is(recErr, errCompletionRecorded) {
				stepError = recErr
			} else if errors.Is(recErr, ErrConflictingWorkflowID) {
				// The workflow changed hands before the failure was recorded. We rolled back and, now, park.
				return nil, recErr
			} else {
				c.logger.Warn("Failed to record transaction failure in the user database; the system database remains the source of truth",
					"datasource", ds.name, "workflow_id", stepState.workflowID, "step_id", stepState.stepID, "error", recErr)
			}
		}
	}
	// If the step completion was already recorded, we might have lost ownership of this execution
	// Or we tried to write after having lost the commit ack
	// Resolve the situation (park or replay)
	if errors.Is(stepError, errCompletionRecorded) {
		return resolveRecordedCompletion()
	}

	if cerr := checkpoint(encodedStepOutput, serializedErr, ser.Name(), stepStartTime); cerr != nil {
		if stepError != nil {
			cerr = errors.Join(cerr, stepError)
		}
		return nil, models.NewStepExecutionError(stepState.workflowID, stepOpts.stepName, cerr)
	}

	return stepOutput, stepError
}
