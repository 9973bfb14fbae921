// Package internals is the contract between DBOS Transact and
// the commercial module. It exposes OSS internals to that module.
package internals

import (
	"context"
	"log/slog"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/dbos-inc/dbos-transact-golang/dbos/internal/models"
	"github.com/dbos-inc/dbos-transact-golang/dbos/internal/sysdb"
)

// Runtime is what the Context passed to a dbos.ConductorFactory also implements,
// beyond dbos.Context. OSS root context satisfies it.
type Runtime interface {
	dbos.Context

	SystemDB() SystemDatabase          // The system database, for queries beyond the public API
	Logger() *slog.Logger              // The context's logger
	AlertHandler() dbos.AlertHandler   // The handler registered with SetAlertHandler, or nil
	DBOSVersion() string               // The dbos module version recorded in the binary's build info
	AutoUpgradableWorkflows() []string // The recorded names of the registered workflows enrolled in auto-upgrade, sorted

	RecoverPendingWorkflows(executorIDs []string) ([]dbos.WorkflowHandle[any], error)
	DecodeStoredValue(value, serialization string) (any, error)
}

// RuntimeOf returns the Runtime "view" of a Context created by dbos.NewContext.
func RuntimeOf(ctx dbos.Context) (Runtime, error) {
	rt, ok := ctx.(Runtime)
	if !ok {
		return nil, &dbos.Error{
			Code:    dbos.ErrorCodeInitialization,
			Message: "the Context does not expose the DBOS runtime; it must come from dbos.NewContext",
		}
	}
	return rt, nil
}

// The system database.
type (
	SystemDatabase = sysdb.SystemDatabase // The interface

	// These are internal types, not importable from outside the OSS package
	// We alias them publicly for the commercial package to use
	DeleteWorkflowsInput     = sysdb.DeleteWorkflowsDBInput
	BackfillScheduleInput    = sysdb.BackfillScheduleDBInput
	GetWorkflowChildrenInput = sysdb.GetWorkflowChildrenDBInput

	Tx        = sysdb.Tx        // A transaction on the system database pool
	TxOptions = sysdb.TxOptions // Options for Pool().BeginTx
	Querier   = sysdb.Querier   // What a pool and a transaction both run queries on

	// A sharded system database's commercial backend; see dbos.RegisterShardingBackend.
	ShardingBackend        = sysdb.ShardingBackend
	ShardingBackendInput   = sysdb.ShardingBackendInput
	ShardingBackendFactory = sysdb.ShardingBackendFactory
)

// GlobalShardKey is the shard key of every row in a global table: queues, schedules,
// application versions, and the migration version row.
const GlobalShardKey = sysdb.GlobalShardKey

// InternalQueueName is the queue DBOS runs its own work on: recovery, schedules, and
// the workflows suspend mode re-enqueues when they ran on no queue.
const InternalQueueName = models.InternalQueueName

// KeyedID prefixes id with key as every DBOS SDK does: "<len(key)>:<key>:<id>", the
// length counted in code points. An empty key leaves id unchanged.
func KeyedID(key, id string) string { return sysdb.KeyedID(key, id) }

// KeyClause is the predicate confining a statement to the rows under key: " AND
// shard_key = $n", binding key as the next argument of args, or "" for no key. It
// follows a predicate on the workflow ID, so a router sends the statement to one shard.
func KeyClause(key string, args *[]any) string { return sysdb.KeyClause(key, args) }

// Retry are not part of the SystemDatabase interface today
type RetryOption = sysdb.RetryOption

func Retry(ctx context.Context, fn func() error, options ...RetryOption) error {
	return sysdb.Retry(ctx, fn, options...)
}

func RetryWithResult[T any](ctx context.Context, fn func() (T, error), options ...RetryOption) (T, error) {
	return sysdb.RetryWithResult(ctx, fn, options...)
}

func WithRetrierLogger(logger *slog.Logger) RetryOption {
	return sysdb.WithRetrierLogger(logger)
}

// WithRetryCondition adds error predicates under which a retried operation is replayed.
func WithRetryCondition(fns ...func(error, *slog.Logger) bool) RetryOption {
	return sysdb.WithRetryCondition(fns...)
}
