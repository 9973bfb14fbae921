package dbos

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos/internal/models"
	"github.com/dbos-inc/dbos-transact-golang/dbos/internal/sysdb"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/robfig/cron/v3"
)

const (
	_DEFAULT_SYSTEM_DB_SCHEMA          = "dbos"
	_DEFAULT_SYSTEM_DB_STARTUP_TIMEOUT = 2 * time.Minute
	_DBOS_DOMAIN                       = "cloud.dbos.dev"
	_LAUNCH_ROLLBACK_TIMEOUT           = 30 * time.Second
	_DEFAULT_AUTO_UPGRADE_INTERVAL     = 30 * time.Second
)

// Config holds configuration parameters for initializing a DBOS context.
// AppName is required, along with exactly one of DatabaseURL, SystemDBPool,
// or SQLiteSystemDB.
type Config struct {
	AppName string // Application name for identification (required)
	// DatabaseURL is the system-database connection string. Accepts Postgres URLs or
	// key=value DSNs (e.g. postgres://user:pass@host:5432/dbname; CockroachDB uses the
	// same form) and sqlite URLs (sqlite:/path/to.db, sqlite:relative.db, or
	// sqlite::memory:). Exactly one of DatabaseURL, SystemDBPool, or SQLiteSystemDB must be set.
	// SQLite URLs additionally require importing the driver package:
	// import _ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"
	DatabaseURL                    string
	SystemDBPool                   *pgxpool.Pool   // SystemDBPool is a custom pg/CRDB pool. Optional; takes precedence over DatabaseURL. Mutually exclusive with SQLiteSystemDB.
	SQLiteSystemDB                 *sql.DB         // SQLiteSystemDB is a custom sqlite handle. Optional; takes precedence over DatabaseURL. Mutually exclusive with SystemDBPool. Requires importing dbos/driver/sqlite.
	DatabaseSchema                 string          // Database schema name (defaults to "dbos")
	Logger                         *slog.Logger    // Custom logger instance (defaults to a new slog logger)
	ConductorURL                   string          // DBOS conductor service URL (optional)
	ConductorAPIKey                string          // DBOS conductor API key (optional)
	ConductorExecutorMetadata      map[string]any  // Metadata associated with this executor that may be used to identify it on the Conductor dashboard. Must be JSON-serializable.
	ConductorMetadataOnlyMode      bool            // Send only workflow metadata to Conductor, never workflow data
	TransactEnterpriseKey          string          // The DBOS key that entitles this application to Transact Enterprise features (optional; ConductorAPIKey stands in for it)
	AutoUpgrade                    bool            // Auto-upgrade the workflows this application registers to the latest application version, a Transact Enterprise feature (default: false; see WithAutoUpgrade to enroll workflows one by one)
	AutoUpgradeInterval            time.Duration   // Time between two auto-upgrade passes (defaults to 30 seconds)
	AutoUpgradeGracePeriod         time.Duration   // How long the latest application version must have been the latest before auto-upgrade re-enqueues PENDING workflows left on older versions, giving executors on those versions time to drain. ENQUEUED and DELAYED workflows are upgraded without waiting (defaults to 0)
	ApplicationVersion             string          // Application version (optional, overridden by DBOS__APPVERSION env var)
	ExecutorID                     string          // Executor ID (optional, overridden by DBOS__VMID env var)
	EnablePatching                 bool            // Deprecated: pins the application version to "PATCHING_ENABLED" so every deployment shares one version. Patch and DeprecatePatch no longer require it
	Serializer                     Serializer[any] // Custom serializer for encoding/decoding workflow inputs, outputs, and events (defaults to JSON serializer)
	SchedulerPollingInterval       time.Duration   // controls how often dynamic schedules are reconciled with the database (defaults to 30 seconds)
	AutomaticBackfillMaxTicks      int             // Automatic backfill enqueues at most the latest this many missed executions of a schedule (default 0: every missed execution). [manent patch: backfill the latest missed ticks only]
	SystemDBStartupTimeout         time.Duration   // Maximum time for system-database connection and migrations (defaults to 2 minutes)
	SystemDBIdleTransactionTimeout time.Duration   // Postgres idle_in_transaction_session_timeout for the connections DBOS creates (defaults to 1 minute; negative leaves the server setting)
	NotificationCoalesceInterval   time.Duration   // Controls how often stream-write and set-event notifications are batched
	SkipMigrations                 bool            // Verify the system database schema on launch instead of creating and migrating it
	Sharding                       bool            // Use a sharded system database, a Transact Enterprise feature: every workflow lives under an explicit shard key (see WithShardKey)
	SuspendMode                    bool            // Let Recv and Sleep park a waiting workflow in the system database instead of holding it in memory, a Transact Enterprise feature (default: false)
	namelessOwner                  bool            // Act for no specific application: write unclaimed rows, matches all. Used by clients without an AppName.
	isClient                       bool            // Client handle: runs no workflows, so enqueues leave the version unset by default.
}

var applicationNamePattern = regexp.MustCompile(`^[a-z0-9-_]{3,256}$`)

func processConfig(inputConfig *Config) (*Config, error) {
	// First check required fields
	if len(inputConfig.DatabaseURL) == 0 && inputConfig.SystemDBPool == nil && inputConfig.SQLiteSystemDB == nil {
		return nil, fmt.Errorf("one of databaseURL, systemDBPool, or sqliteSystemDB must be provided")
	}
	if inputConfig.SystemDBPool != nil && inputConfig.SQLiteSystemDB != nil {
		return nil, fmt.Errorf("systemDBPool and sqliteSystemDB are mutually exclusive")
	}
	if len(inputConfig.AppName) == 0 {
		return nil, fmt.Errorf("missing required config field: appName")
	}
	if inputConfig.SystemDBPool == nil && inputConfig.SQLiteSystemDB == nil {
		if _, err := sysdb.DetectDialect(inputConfig.DatabaseURL); err != nil {
			return nil, err
		}
	}
	if inputConfig.SystemDBStartupTimeout < 0 {
		return nil, fmt.Errorf("systemDBStartupTimeout cannot be negative")
	}
	if inputConfig.SystemDBIdleTransactionTimeout > sysdb.MaxIdleTransactionTimeout {
		return nil, fmt.Errorf("systemDBIdleTransactionTimeout cannot exceed %s", sysdb.MaxIdleTransactionTimeout)
	}
	if inputConfig.NotificationCoalesceInterval < 0 || (inputConfig.NotificationCoalesceInterval > 0 && inputConfig.NotificationCoalesceInterval < sysdb.MinNotificationCoalesceInterval) {
		return nil, fmt.Errorf("notificationCoalesceInterval must be at least %s, got %s", sysdb.MinNotificationCoalesceInterval, inputConfig.NotificationCoalesceInterval)
	}
	if inputConfig.AutoUpgradeInterval < 0 {
		return nil, fmt.Errorf("autoUpgradeInterval cannot be negative")
	}
	if inputConfig.AutoUpgradeGracePeriod < 0 {
		return nil, fmt.Errorf("autoUpgradeGracePeriod cannot be negative")
	}

	dbosConfig := &Config{
		DatabaseURL:                    inputConfig.DatabaseURL,
		AppName:                        inputConfig.AppName,
		DatabaseSchema:                 inputConfig.DatabaseSchema,
		SkipMigrations:                 inputConfig.SkipMigrations,
		Logger:                         inputConfig.Logger,
		ConductorURL:                   inputConfig.ConductorURL,
		ConductorAPIKey:                inputConfig.ConductorAPIKey,
		ConductorExecutorMetadata:      inputConfig.ConductorExecutorMetadata,
		ConductorMetadataOnlyMode:      inputConfig.ConductorMetadataOnlyMode,
		TransactEnterpriseKey:          inputConfig.TransactEnterpriseKey,
		AutoUpgrade:                    inputConfig.AutoUpgrade,
		AutoUpgradeInterval:            inputConfig.AutoUpgradeInterval,
		AutoUpgradeGracePeriod:         inputConfig.AutoUpgradeGracePeriod,
		ApplicationVersion:             inputConfig.ApplicationVersion,
		ExecutorID:                     inputConfig.ExecutorID,
		SystemDBPool:                   inputConfig.SystemDBPool,
		SQLiteSystemDB:                 inputConfig.SQLiteSystemDB,
		EnablePatching:                 inputConfig.EnablePatching,
		Serializer:                     inputConfig.Serializer,
		SchedulerPollingInterval:       inputConfig.SchedulerPollingInterval,
		AutomaticBackfillMaxTicks:      inputConfig.AutomaticBackfillMaxTicks,
		SystemDBStartupTimeout:         inputConfig.SystemDBStartupTimeout,
		SystemDBIdleTransactionTimeout: inputConfig.SystemDBIdleTransactionTimeout,
		NotificationCoalesceInterval:   inputConfig.NotificationCoalesceInterval,
		Sharding:                       inputConfig.Sharding,
		SuspendMode:                    inputConfig.SuspendMode,
		namelessOwner:                  inputConfig.namelessOwner,
		isClient:                       inputConfig.isClient,
	}

	if dbosConfig.ConductorExecutorMetadata != nil {
		if _, err := json.Marshal(dbosConfig.ConductorExecutorMetadata); err != nil {
			return nil, fmt.Errorf("conductorExecutorMetadata must be JSON-serializable: %w", err)
		}
	}

	// Load defaults
	if dbosConfig.Logger == nil {
		dbosConfig.Logger = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if dbosConfig.EnablePatching {
		dbosConfig.Logger.Warn("EnablePatching is deprecated and will be removed in a future release. " +
			"Patch and DeprecatePatch no longer require it. " +
			"To keep every deployment on one application version, as the flag does, set ApplicationVersion explicitly.")
	}

	// Conductor addresses the application by name and refuses one outside its rule, so an
	// application about to connect cannot usefully launch. A self-hosted one is told and left alone.
	if !dbosConfig.namelessOwner && !applicationNamePattern.MatchString(dbosConfig.AppName) {
		msg := fmt.Sprintf("invalid application name '%s': application names must be between 3 and 256 characters long and contain only lowercase letters, numbers, dashes, and underscores", dbosConfig.AppName)
		if dbosConfig.ConductorAPIKey != "" || os.Getenv("DBOS__CLOUD") == "true" {
			return nil, errors.New(msg)
		}
		dbosConfig.Logger.Warn(msg + "; it cannot register with DBOS Conductor")
	}
	if dbosConfig.DatabaseSchema == "" {
		dbosConfig.DatabaseSchema = _DEFAULT_SYSTEM_DB_SCHEMA
	}
	if dbosConfig.SystemDBStartupTimeout == 0 {
		dbosConfig.SystemDBStartupTimeout = _DEFAULT_SYSTEM_DB_STARTUP_TIMEOUT
	}
	if dbosConfig.SystemDBIdleTransactionTimeout == 0 {
		dbosConfig.SystemDBIdleTransactionTimeout = sysdb.DefaultIdleTransactionTimeout
	}
	if dbosConfig.NotificationCoalesceInterval == 0 {
		dbosConfig.NotificationCoalesceInterval = sysdb.DefaultNotificationCoalesceInterval
	}
	if dbosConfig.AutoUpgradeInterval == 0 {
		dbosConfig.AutoUpgradeInterval = _DEFAULT_AUTO_UPGRADE_INTERVAL
	}

	// If patching is enabled and application version is not set, fix the application version
	if dbosConfig.EnablePatching && dbosConfig.ApplicationVersion == "" {
		dbosConfig.ApplicationVersion = "PATCHING_ENABLED"
	}

	// Override with environment variables if set
	if envAppVersion := os.Getenv("DBOS__APPVERSION"); envAppVersion != "" {
		dbosConfig.ApplicationVersion = envAppVersion
	}
	if envExecutorID := os.Getenv("DBOS__VMID"); envExecutorID != "" {
		dbosConfig.ExecutorID = envExecutorID
	}

	// Apply defaults for empty values
	if dbosConfig.ApplicationVersion == "" {
		dbosConfig.ApplicationVersion = computeApplicationVersion(dbosConfig.AppName)
	}
	if dbosConfig.ExecutorID == "" {
		dbosConfig.ExecutorID = "local"
	}

	return dbosConfig, nil
}

// AlertHandler is a function that handles alerts received from DBOS Conductor.
type AlertHandler = models.AlertHandler

// Client is the subset of a Context that works without Launch: it needs
// only a connection to the system database — established by NewClient — and
// none of the launched runtime resources (queue runner, scheduler, conductor,
// workflow recovery)
//
// It provides a programmatic way to interact with your DBOS application from
// external code: enqueueing workflows, workflow management, queue management,
// schedule management, and application version management. Every Context
// is a Client, so a launched Context can be passed anywhere a Client is
// accepted.
//
// Create a standalone Client with NewClient. Use the
// package-level functions (dbos.Enqueue, dbos.ListWorkflows, ...) to get
// compile-time type checking.
type Client interface {
	context.Context

	// Workflow operations
	Enqueue(_ Client, queueName string, workflowName string, input any, opts ...EnqueueOption) (WorkflowHandle[any], error) // Enqueue a workflow by name to a named queue
	Send(_ Client, destinationID string, message any, topic string, opts ...SendOption) error                               // Send a message to a workflow
	SendBulk(_ Client, messages []SendMessage, opts ...SendOption) error                                                    // Send many messages to workflows at once
	GetEvent(_ Client, targetWorkflowID string, key string, timeout time.Duration) (any, error)                             // Get a key-value event from a target workflow. Returns an opaque envelope; call dbos.GetEvent[R] instead to receive the decoded value
	ReadStream(_ Client, workflowID string, key string, opts ...ReadStreamOption) ([]any, bool, error)                      // Read values from a durable stream (blocks until workflow inactive or stream closed)
	ReadStreamAsync(_ Client, workflowID string, key string) (<-chan StreamValue[any], error)                               // Read values from a durable stream asynchronously

	// Workflow management
	RetrieveWorkflow(_ Client, workflowID string) (WorkflowHandle[any], error)                                               // Get a handle to an existing workflow
	CancelWorkflow(_ Client, workflowID string, opts ...CancelWorkflowOption) error                                          // Cancel a workflow by setting its status to CANCELLED
	CancelWorkflows(_ Client, workflowIDs []string, opts ...CancelWorkflowOption) error                                      // Cancel multiple workflows in a single DB round-trip
	SetWorkflowAttributes(_ Client, workflowID string, attributes map[string]any, opts ...SetWorkflowAttributesOption) error // Replace attributes (nil clears them), or shallow-merge with WithMergeAttributes
	SetWorkflowDelay(_ Client, workflowID string, opts ...SetWorkflowDelayOption) error                                      // Set or update the delay on a DELAYED workflow
	ResumeWorkflow(_ Client, workflowID string, opts ...ResumeWorkflowOption) (WorkflowHandle[any], error)                   // Resume a cancelled workflow
	ResumeWorkflows(_ Client, workflowIDs []string, opts ...ResumeWorkflowOption) ([]WorkflowHandle[any], error)             // Resume multiple workflows in a single DB round-trip
	RewindWorkflow(_ Client, workflowID string, opts ...RewindWorkflowOption) (WorkflowHandle[any], error)                   // Drop a workflow's history from a step onwards and re-run it under the same ID
	ForkWorkflow(_ Client, input ForkWorkflowInput) (WorkflowHandle[any], error)                                             // Fork a workflow from a specific step
	ForkWorkflows(_ Client, input ForkWorkflowsInput) ([]WorkflowHandle[any], error)                                         // Fork multiple workflows in a single DB round-trip
	ListWorkflows(_ Client, opts ...ListWorkflowsOption) ([]WorkflowStatus, error)                                           // List workflows based on filtering criteria
	GetWorkflowSteps(_ Client, workflowID string, opts ...GetWorkflowStepsOption) ([]StepInfo, error)                        // Get the execution steps of a workflow
	GetWorkflowAggregates(_ Client, input GetWorkflowAggregatesInput) ([]WorkflowAggregateRow, error)                        // Aggregate counts of workflows by one or more grouping columns
	GetStepAggregates(_ Client, input GetStepAggregatesInput) ([]StepAggregateRow, error)                                    // Aggregate counts/durations of steps by function name and/or status
	DeleteWorkflows(_ Client, workflowIDs []string, opts ...DeleteWorkflowOption) error                                      // Delete workflows and all their associated data
	BindShardKeys(_ Client, keys map[string]string) Client                                                                   // Bind workflow IDs to their shard keys, for the operations run on the returned copy (sharded only)
	BindShardKey(_ Client, workflowID, key string) Client                                                                    // Bind one workflow ID to its shard key, for the operations run on the returned copy (sharded only)

	// Queue management
	RegisterQueue(_ Client, name string, options ...QueueOption) (Queue, error) // Register and persist a database-backed queue
	RetrieveQueue(_ Client, name string) (Queue, error)                         // Retrieve a database-backed queue by name (ErrQueueNotFound if absent)
	ListQueues(_ Client, opts ...ListQueuesOption) ([]Queue, error)             // List database-backed queues (own + unclaimed by default)
	DeleteQueue(_ Client, name string) error                                    // Delete a database-backed queue

	// Schedule management
	CreateSchedule(_ Client, spec ScheduleSpec) error                                       // Create a new schedule
	ApplySchedules(_ Client, schedules []ScheduleSpec) error                                // Apply schedules (create or update)
	PauseSchedule(_ Client, scheduleName string) error                                      // Pause a schedule
	ResumeSchedule(_ Client, scheduleName string) error                                     // Resume a paused schedule
	DeleteSchedule(_ Client, scheduleName string) error                                     // Delete a schedule
	GetSchedule(_ Client, scheduleName string) (WorkflowSchedule, error)                    // Get a schedule by name (ErrScheduleNotFound if absent)
	ListSchedules(_ Client, opts ...ListSchedulesOption) ([]WorkflowSchedule, error)        // List schedules with optional filters
	BackfillSchedule(_ Client, scheduleName string, start, end time.Time) ([]string, error) // Backfill a schedule, returning the IDs of the enqueued workflows
	TriggerSchedule(_ Client, scheduleName string) (WorkflowHandle[any], error)             // Trigger a schedule immediately, returning a handle to the enqueued workflow

	// Application management
	ListApplicationVersions(_ Client) ([]VersionInfo, error)                                // List all registered application versions, newest first
	GetLatestApplicationVersion(_ Client) (VersionInfo, error)                              // Get the latest registered application version
	SetLatestApplicationVersion(_ Client, versionName string) error                         // Mark the named version as latest by bumping its timestamp to now
	RenameApplication(_ Client, input RenameApplicationInput) (ApplicationRowCounts, error) // Re-own system database rows after an application is renamed

	Shutdown(_ Client, timeout time.Duration) error // Gracefully shutdown all DBOS resources; returns an error if the timeout expired before they all stopped. Only valid on the Context returned by NewContext
}

// Context represents a DBOS execution context that provides workflow orchestration capabilities.
// It extends the standard Go context.Context and adds methods for running workflows and steps,
// inter-workflow communication, and state management.
//
// The context manages the lifecycle of workflows, provides durability guarantees, and enables
// recovery of interrupted workflows.
type Context interface {
	Client

	// Context Lifecycle
	Launch() error // Launch the DBOS runtime (system database, queues, scheduler) and recover this executor's PENDING workflows: interrupted workflows resume from their last completed step; queued ones are returned to their queue. When Conductor is configured, recovery is left to Conductor. Only valid on the Context returned by NewContext

	// Workflow operations
	RunAsStep(_ Context, fn StepFunc, opts ...StepOption) (any, error)                                      // Execute a function as a durable step within a workflow
	RunAsTransaction(_ Context, ds *DataSource, fn TxnFunc, opts ...StepOption) (any, error)                // Execute a function as a durable transaction against a registered data source
	RunWorkflow(_ Context, fn WorkflowFunc, input any, opts ...WorkflowOption) (WorkflowHandle[any], error) // Start a new workflow execution
	Go(_ Context, fn StepFunc, opts ...StepOption) (<-chan StepOutcome[any], error)                         // Starts a step inside a Go routine and returns a channel to receive the result
	Select(_ Context, channels []<-chan StepOutcome[any]) (any, error)                                      // Performs a durable select over a slice of channels, checkpointing the selected channel and value
	Recv(_ Context, topic string, timeout time.Duration, opts ...RecvOption) (any, error)                   // Receive a message sent to this workflow
	SetEvent(_ Context, key string, message any, opts ...SetEventOption) error                              // Set a key-value event for this workflow
	WriteStream(_ Context, key string, value any, opts ...WriteStreamOption) error                          // Write a value to a durable stream
	CloseStream(_ Context, key string) error                                                                // Close a durable stream
	Sleep(_ Context, duration time.Duration, opts ...SleepOption) (time.Duration, error)                    // Durable sleep that survives workflow recovery
	Patch(_ Context, patchName string) (bool, error)                                                        // Check if workflow should use patched code
	DeprecatePatch(_ Context, patchName string) error                                                       // Deprecate a patch
	GetWorkflowID() (string, error)                                                                         // Get the current workflow ID (only available within workflows)
	GetStepID() (int, error)                                                                                // Get the current step ID (only available within workflows)
	GetAuthenticatedUser() (string, error)                                                                  // Get the authenticated user of the current workflow, empty if none (only available within workflows)
	GetShardKey() (string, error)                                                                           // Get the shard key of the current workflow, empty if unsharded (only available within workflows)

	// Registration
	ListRegisteredWorkflows(_ Context) []WorkflowRegistryEntry // List workflows registered in this process
	ListenQueues(_ Context, names ...string)                   // Replace the set of queues this process listens to (each call replaces the whole set)
	ListenedQueues(_ Context) []string                         // Get the current listen set (empty means every queue)

	// Accessors
	GetApplicationVersion() string // Get the application version for this context
	GetExecutorID() string         // Get the executor ID for this context
	GetApplicationID() string      // Get the application ID for this context

	// Context management
	From(_ Context, ctx context.Context) Context                                                // Returns a copy of the current Context wrapping the provided context.Context
	WithoutCancel(_ Context) Context                                                            // Returns a copy that is not canceled when the parent is canceled
	WithTimeout(_ Context, timeout time.Duration) (Context, context.CancelFunc)                 // Returns a copy that is canceled after the timeout
	WithDeadlineCause(_ Context, deadline time.Time, cause error) (Context, context.CancelFunc) // Returns a copy that is canceled at the deadline with the given cause
	WithValue(key, val any) Context                                                             // Returns a copy of the DBOS context with the given key-value pair
	WithCancel() (Context, context.CancelFunc)                                                  // Returns a copy that can be manually canceled
	WithCancelCause() (Context, context.CancelCauseFunc)                                        // Returns a copy of the DBOS context that can be canceled with a cause

	// Alert handling
	SetAlertHandler(handler AlertHandler) // Register a handler for alerts from DBOS Conductor (must be called before Launch)
}

type dbosContext struct {
	ctx           context.Context
	rootCtx       context.Context
	ctxCancelFunc context.CancelCauseFunc
	root          bool

	launched *atomic.Bool
	// Launch and shutdown are permanent, one-shot lifecycle transitions.
	launchStarted   atomic.Bool
	shutdownStarted atomic.Bool

	systemDB sysdb.SystemDatabase
	config   *Config

	// Queue runner
	queueRunner        *queueRunner
	queueRunnerStarted atomic.Bool

	// Conductor client
	conductor ConductorConnection

	// Auto-upgrade, started by Launch when a workflow enrolled
	autoUpgrader *autoUpgradeLoop

	// Suspend mode's database operations; nil unless Config.SuspendMode is set
	suspend SuspendBackend

	// Application metadata
	applicationVersion string
	applicationID      string
	executorID         string

	// Wait group for workflow goroutines
	workflowsWg *sync.WaitGroup

	// Workflow registry - read-mostly sync.Map since registration happens only before launch
	workflowRegistry        *sync.Map // map[string]WorkflowRegistryEntry
	workflowCustomNametoFQN *sync.Map // Maps fully qualified workflow names to custom names. Usefor when client enqueues a workflow by name because registry is indexed by FQN.

	// Executions running on this context (key = executionKey, value = activeWorkflowEntry)
	activeExecutions *sync.Map

	// Workflow scheduler
	workflowScheduler         *cron.Cron
	workflowSchedulerStarted  atomic.Bool
	scheduleReconcilerWg      sync.WaitGroup
	workflowTimeoutsMonitorWg sync.WaitGroup

	scheduleMu sync.Mutex
	// Schedule entry ID mapping (scheduleName -> cron.EntryID)
	scheduleEntryIDs map[string]cron.EntryID
	// Definition signature of each installed cron entry (scheduleName -> sig).
	// Used by the reconciler to detect definition changes and reinstall the entry.
	scheduleInstalledSignatures map[string]scheduleSignature

	// logger
	logger *slog.Logger

	serializer Serializer[any]

	dataSources *dataSourceRegistry

	// Alert handler
	alertHandler AlertHandler
}

type dataSourceRegistry struct {
	mu      sync.Mutex
	sources []*DataSource
}

func (c *dbosContext) registerDataSource(ds *DataSource) {
	c.dataSources.mu.Lock()
	defer c.dataSources.mu.Unlock()
	c.dataSources.sources = append(c.dataSources.sources, ds)
}

func (c *dbosContext) registeredDataSources() []*DataSource {
	c.dataSources.mu.Lock()
	defer c.dataSources.mu.Unlock()
	return slices.Clone(c.dataSources.sources)
}

// SetAlertHandler registers a handler function for alerts received from DBOS Conductor.
// Must be called before Launch(). Only one handler is allowed per context.
func (c *dbosContext) SetAlertHandler(handler AlertHandler) {
	if handler == nil {
		panic("alert handler cannot be nil")
	}
	if c.launched.Load() {
		panic("cannot set alert handler after Launch()")
	}
	if c.alertHandler != nil {
		panic("alert handler is already registered")
	}
	c.alertHandler = handler
}

// SetAlertHandler registers a handler function for alerts received from DBOS Conductor.
// Must be called before Launch(). Only one handler is allowed per context.
func SetAlertHandler(ctx Context, handler AlertHandler) {
	if ctx == nil {
		panic("ctx cannot be nil")
	}
	ctx.SetAlertHandler(handler)
}

// ClearRegistries clears the workflow registry,
// allowing re-registration of workflows. Intended for testing only.
func (c *dbosContext) ClearRegistries() {
	c.workflowRegistry.Clear()
	c.workflowCustomNametoFQN.Clear()
	c.alertHandler = nil
}

func (c *dbosContext) Deadline() (deadline time.Time, ok bool) {
	return c.ctx.Deadline()
}

func (c *dbosContext) Done() <-chan struct{} {
	return c.ctx.Done()
}

func (c *dbosContext) Err() error {
	return c.ctx.Err()
}

func (c *dbosContext) Value(key any) any {
	return c.ctx.Value(key)
}

// clone returns a copy of the DBOS context with the underlying context.Context replaced by ctx.
// Root-only lifecycle fields (cancel func, conductor, scheduler state, alert handler)
// are deliberately not propagated to derived contexts.
func (c *dbosContext) clone(ctx context.Context) *dbosContext {
	childCtx := &dbosContext{
		ctx:                     ctx,
		rootCtx:                 c.rootCtx,
		config:                  c.config,
		logger:                  c.logger,
		systemDB:                c.systemDB,
		workflowsWg:             c.workflowsWg,
		workflowRegistry:        c.workflowRegistry,
		workflowCustomNametoFQN: c.workflowCustomNametoFQN,
		activeExecutions:        c.activeExecutions,
		applicationVersion:      c.applicationVersion,
		executorID:              c.executorID,
		applicationID:           c.applicationID,
		queueRunner:             c.queueRunner,
		serializer:              c.serializer,
		launched:                c.launched,
		dataSources:             c.dataSources,
		suspend:                 c.suspend,
	}
	return childCtx
}

func (c *dbosContext) From(_ Context, ctx context.Context) Context {
	if ctx == nil {
		return nil
	}
	return c.clone(ctx)
}

// From returns a copy of dbosCtx whose embedded context.Context is replaced by ctx.
//
// The returned Context takes its Deadline, cancellation (Done/Err), and Values
// entirely from ctx; dbosCtx contributes only the DBOS runtime state (system
// database, registries, configuration, logger). ctx must descend from a
// context.Context provided by DBOS (e.g., the first argument of RunWorkflow or
// RunAsStep), because DBOS metadata such as the current workflow state travels
// in context values.
//
// From returns nil if dbosCtx or ctx is nil.
func From(dbosCtx Context, ctx context.Context) Context {
	if dbosCtx == nil {
		return nil
	}
	return dbosCtx.From(dbosCtx, ctx)
}

// WithValue returns a copy of the DBOS context with the given key-value pair.
// This is similar to context.WithValue but maintains DBOS context capabilities.
func WithValue(ctx Context, key, val any) Context {
	if ctx == nil {
		return nil
	}
	return ctx.WithValue(key, val)
}

func (c *dbosContext) WithValue(key, val any) Context {
	return c.clone(context.WithValue(c.ctx, key, val))
}

func (c *dbosContext) WithoutCancel(_ Context) Context {
	return c.clone(context.WithoutCancel(c.ctx))
}

// WithoutCancel returns a copy of the DBOS context that is not canceled when the parent context is canceled.
// This can be used to detach a child workflow.
func WithoutCancel(ctx Context) Context {
	if ctx == nil {
		return nil
	}
	return ctx.WithoutCancel(ctx)
}

func (c *dbosContext) WithCancel() (Context, context.CancelFunc) {
	newCtx, cancelFunc := context.WithCancel(c.ctx)
	return c.clone(newCtx), cancelFunc
}

// WithCancel returns a copy of the DBOS context that can be manually canceled.
// The returned CancelFunc must be called when the derived context is no longer needed,
// to release resources associated with it.
func WithCancel(ctx Context) (Context, context.CancelFunc) {
	if ctx == nil {
		return nil, func() {}
	}
	return ctx.WithCancel()
}

func (c *dbosContext) WithCancelCause() (Context, context.CancelCauseFunc) {
	newCtx, cancelCauseFunc := context.WithCancelCause(c.ctx)
	return c.clone(newCtx), cancelCauseFunc
}

// WithCancelCause returns a copy of the DBOS context that can be canceled with a cause.
// The returned context will be canceled when the returned CancelCauseFunc is called with a cause.
func WithCancelCause(ctx Context) (Context, context.CancelCauseFunc) {
	if ctx == nil {
		return nil, func(error) {}
	}
	return ctx.WithCancelCause()
}

var errDBOSContextTimeout = fmt.Errorf("DBOS context timeout: %w", context.DeadlineExceeded)

var errShutdown = errors.New("DBOS is shutting down")

func (c *dbosContext) WithTimeout(_ Context, timeout time.Duration) (Context, context.CancelFunc) {
	newCtx, cancelFunc := context.WithTimeoutCause(c.ctx, timeout, errDBOSContextTimeout)
	return c.clone(newCtx), cancelFunc
}

// WithTimeout returns a copy of the DBOS context that is canceled after the given timeout.
func WithTimeout(ctx Context, timeout time.Duration) (Context, context.CancelFunc) {
	if ctx == nil {
		return nil, func() {}
	}
	return ctx.WithTimeout(ctx, timeout)
}

func (c *dbosContext) WithDeadlineCause(_ Context, deadline time.Time, cause error) (Context, context.CancelFunc) {
	newCtx, cancelFunc := context.WithDeadlineCause(c.ctx, deadline, cause)
	return c.clone(newCtx), cancelFunc
}

// WithDeadlineCause returns a copy of the DBOS context that is canceled at the given deadline,
// with cause as the error returned by context.Cause.
func WithDeadlineCause(ctx Context, deadline time.Time, cause error) (Context, context.CancelFunc) {
	if ctx == nil {
		return nil, func() {}
	}
	return ctx.WithDeadlineCause(ctx, deadline, cause)
}

func (c *dbosContext) getWorkflowScheduler() *cron.Cron {
	return c.workflowScheduler
}

func (c *dbosContext) GetApplicationVersion() string {
	return c.applicationVersion
}

func (c *dbosContext) GetExecutorID() string {
	return c.executorID
}

func (c *dbosContext) GetApplicationID() string {
	return c.applicationID
}

// GetApplicationVersion is the package-level wrapper for Context.GetApplicationVersion.
// It returns the application version of the provided context, or an empty string if ctx is nil.
func GetApplicationVersion(ctx Context) string {
	if ctx == nil {
		return ""
	}
	return ctx.GetApplicationVersion()
}

// GetExecutorID is the package-level wrapper for Context.GetExecutorID.
// It returns the executor ID of the provided context, or an empty string if ctx is nil.
func GetExecutorID(ctx Context) string {
	if ctx == nil {
		return ""
	}
	return ctx.GetExecutorID()
}

// GetApplicationID is the package-level wrapper for Context.GetApplicationID.
// It returns the application ID of the provided context, or an empty string if ctx is nil.
func GetApplicationID(ctx Context) string {
	if ctx == nil {
		return ""
	}
	return ctx.GetApplicationID()
}

// ListRegisteredWorkflows returns information about registered workflows with their registration parameters.
func (c *dbosContext) ListRegisteredWorkflows(_ Context) []WorkflowRegistryEntry {
	var workflows []WorkflowRegistryEntry
	c.workflowRegistry.Range(func(key, value any) bool {
		workflows = append(workflows, value.(WorkflowRegistryEntry))
		return true
	})
	return workflows
}

// NewContext creates a new DBOS context with the provided configuration.
// The context must be launched with Launch() for workflow execution and should be shut down with Shutdown().
// This function initializes the DBOS system database, sets up the queue sub-system, and prepares the workflow registry.
//
// Example:
//
//	config := dbos.Config{
//	    DatabaseURL: "postgres://user:pass@localhost:5432/dbname",
//	    AppName:     "my-app",
//	}
//	ctx, err := dbos.NewContext(context.Background(), config)
//	if err != nil {
//	    log.Fatal(err)
//	}
//	defer dbos.Shutdown(ctx, 30*time.Second)
//
//	if err := ctx.Launch(); err != nil {
//	    log.Fatal(err)
//	}
func NewContext(ctx context.Context, inputConfig Config) (Context, error) {
	dbosBaseCtx, cancelFunc := context.WithCancelCause(ctx)
	initExecutor := &dbosContext{
		workflowsWg:                 &sync.WaitGroup{},
		ctx:                         dbosBaseCtx,
		rootCtx:                     dbosBaseCtx,
		ctxCancelFunc:               cancelFunc,
		root:                        true,
		launched:                    &atomic.Bool{},
		workflowRegistry:            &sync.Map{},
		workflowCustomNametoFQN:     &sync.Map{},
		activeExecutions:            &sync.Map{},
		dataSources:                 &dataSourceRegistry{},
		workflowScheduler:           cron.New(cron.WithSeconds()),
		scheduleEntryIDs:            make(map[string]cron.EntryID),
		scheduleInstalledSignatures: make(map[string]scheduleSignature),
	}

	// Load and process the configuration
	config, err := processConfig(&inputConfig)
	if err != nil {
		return nil, models.NewInitializationError(err.Error())
	}
	initExecutor.config = config

	// Set global logger
	initExecutor.logger = config.Logger
	initExecutor.logger.Info("Initializing DBOS context", "app_name", config.AppName, "dbos_version", getDBOSVersion())

	// Initialize global variables from processed config (already handles env vars and defaults)
	initExecutor.applicationVersion = config.ApplicationVersion
	initExecutor.executorID = config.ExecutorID

	initExecutor.applicationID = os.Getenv("DBOS__APPID")
	initExecutor.serializer = config.Serializer

	// Resolve the Conductor configuration. In DBOS Cloud, connect to Conductor for
	// observability using the cloud-provided environment variables. Otherwise, connect
	// if a Conductor API key was configured. Fail early if go.dbos.dev/dbos-enterprise-go
	// is not linked.
	var conductorOpts *ConductorOptions
	if os.Getenv("DBOS__CLOUD") == "true" {
		cloudAppName := os.Getenv("DBOS__CONDUCTOR_APP_NAME")
		cloudConductorKey := os.Getenv("DBOS__CONDUCTOR_KEY")
		cloudConductorURL := os.Getenv("DBOS__CONDUCTOR_URL")
		if cloudAppName != "" && cloudConductorKey != "" && cloudConductorURL != "" {
			conductorOpts = &ConductorOptions{
				URL:              cloudConductorURL,
				APIKey:           cloudConductorKey,
				AppName:          cloudAppName,
				ExecutorMetadata: config.ConductorExecutorMetadata,
				MetadataOnlyMode: config.ConductorMetadataOnlyMode,
			}
		}
	} else if config.ConductorAPIKey != "" {
		initExecutor.executorID = uuid.NewString()
		if config.ConductorURL == "" {
			dbosDomain := os.Getenv("DBOS_DOMAIN")
			if dbosDomain == "" {
				dbosDomain = _DBOS_DOMAIN
			}
			config.ConductorURL = fmt.Sprintf("wss://%s/conductor/v1alpha1", dbosDomain)
		}
		conductorOpts = &ConductorOptions{
			URL:              config.ConductorURL,
			APIKey:           config.ConductorAPIKey,
			AppName:          config.AppName,
			ExecutorMetadata: config.ConductorExecutorMetadata,
			MetadataOnlyMode: config.ConductorMetadataOnlyMode,
		}
	}
	var conductorFactory ConductorFactory
	if conductorOpts != nil {
		if conductorFactory = registeredConductorFactory(); conductorFactory == nil {
			return nil, enterpriseUnavailableError(conductorFeature)
		}
	}

	if features := enabledFeatures(config); len(features) > 0 {
		if err := requireEnterprise(features, config.TransactEnterpriseKey, config.ConductorAPIKey, inputConfig.ConductorURL); err != nil {
			return nil, err
		}
		if config.AutoUpgrade && registeredAutoUpgradeFactory() == nil {
			return nil, enterpriseUnavailableError(autoUpgradeFeature.description)
		}
	}
	var suspendFactory SuspendBackendFactory
	if config.SuspendMode {
		if suspendFactory = registeredSuspendBackendFactory(); suspendFactory == nil {
			return nil, enterpriseUnavailableError(suspendFeature.description)
		}
	}
	var shardingFactory sysdb.ShardingBackendFactory
	if config.Sharding {
		if shardingFactory = registeredShardingBackendFactory(); shardingFactory == nil {
			return nil, enterpriseUnavailableError(shardingFeature.description)
		}
	}

	ownerAppName := config.AppName
	if config.namelessOwner {
		ownerAppName = ""
	}
	newSystemDatabaseInputs := sysdb.NewSystemDatabaseInput{
		DatabaseURL:                  config.DatabaseURL,
		DatabaseSchema:               config.DatabaseSchema,
		SkipMigrations:               config.SkipMigrations,
		CustomPool:                   config.SystemDBPool,
		CustomSqliteDB:               config.SQLiteSystemDB,
		Logger:                       initExecutor.logger,
		AppName:                      ownerAppName,
		ConnectionAppName:            config.AppName,
		IdleTransactionTimeout:       config.SystemDBIdleTransactionTimeout,
		NotificationCoalesceInterval: config.NotificationCoalesceInterval,
		Sharding:                     shardingFactory,
		EncodeScheduledInput: func(ctx context.Context, scheduledTime time.Time, scheduleContext json.RawMessage) (*string, string, error) {
			ser := resolveEncoder(ctx)
			encoded, err := ser.Encode(ScheduledWorkflowInput{
				ScheduledTime: scheduledTime,
				Context:       scheduleContext,
			})
			return encoded, ser.Name(), err
		},
	}

	// Create the system database within a bounded startup window. This covers
	// pool acquisition, database creation, migrations, and the final ping.
	startupCtx, cancelStartup := context.WithTimeout(initExecutor, config.SystemDBStartupTimeout)
	defer cancelStartup()
	newSystemDatabaseInputs.StartupTimeout = config.SystemDBStartupTimeout
	systemDB, err := sysdb.NewSystemDatabase(startupCtx, newSystemDatabaseInputs)
	if err != nil {
		initExecutor.logger.Error("failed to create system database", "error", err)
		return nil, models.NewInitializationError(err.Error())
	}
	initExecutor.systemDB = systemDB
	initExecutor.logger.Debug("System database initialized")

	// Initialize the queue runner (which owns the DBOS internal queue)
	initExecutor.queueRunner = newQueueRunner(initExecutor.logger)

	if suspendFactory != nil {
		suspend, err := suspendFactory(initExecutor)
		if err != nil {
			// Leave nothing behind: the system database is already open.
			systemDB.Shutdown(initExecutor, config.SystemDBStartupTimeout)
			cancelFunc(err)
			return nil, models.NewInitializationError(fmt.Sprintf("failed to initialize suspend mode: %v", err))
		}
		initExecutor.suspend = suspend
		initExecutor.logger.Debug("Suspend mode initialized")
	}

	if conductorOpts != nil {
		conductor, err := conductorFactory(initExecutor, *conductorOpts)
		if err != nil {
			// Leave nothing behind: the system database is already open.
			systemDB.Shutdown(initExecutor, config.SystemDBStartupTimeout)
			cancelFunc(err)
			return nil, models.NewInitializationError(fmt.Sprintf("failed to initialize conductor: %v", err))
		}
		initExecutor.conductor = conductor
		initExecutor.logger.Debug("Conductor initialized")
	}

	return initExecutor, nil
}

// ClientConfig holds configuration parameters for NewClient. Exactly one of
// DatabaseURL, SystemDBPool, or SQLiteSystemDB must be set.
type ClientConfig struct {
	// DatabaseURL is the system-database connection string: a Postgres URL or key=value
	// DSN, or a sqlite URL (sqlite:/path/to.db, sqlite:relative.db, or sqlite::memory:).
	// Exactly one of DatabaseURL, SystemDBPool, or SQLiteSystemDB must be set.
	// SQLite URLs additionally require importing the driver package:
	// import _ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"
	DatabaseURL                    string
	AppName                        string          // The application this client acts on behalf of. Leave empty to list all workflows, but beware that writing will serve all applications.
	SystemDBPool                   *pgxpool.Pool   // SystemDBPool is a custom pg/CRDB pool. Optional; takes precedence over DatabaseURL. Mutually exclusive with SQLiteSystemDB.
	SQLiteSystemDB                 *sql.DB         // SQLiteSystemDB is a custom sqlite handle. Optional; takes precedence over DatabaseURL. Mutually exclusive with SystemDBPool. Requires importing dbos/driver/sqlite.
	DatabaseSchema                 string          // Database schema name (defaults to "dbos")
	Logger                         *slog.Logger    // Optional custom logger
	Serializer                     Serializer[any] // Optional custom serializer (defaults to JSON)
	SystemDBStartupTimeout         time.Duration   // Maximum time for system-database connection and schema verification (defaults to 2 minutes)
	SystemDBIdleTransactionTimeout time.Duration   // Postgres idle_in_transaction_session_timeout for the connections the client creates (defaults to 1 minute; negative leaves the server setting)
	Sharding                       bool            // Connect to a sharded system database, which needs go.dbos.dev/dbos-enterprise-go (see Config.Sharding)
}

// NewClient creates a new DBOS client with the provided configuration.
// A client verifies the system database schema instead of migrating it.
// It connects to the system database and starts its notification listener —
// or a poller on backends without listen/notify support — so every Client
// operation, including blocking ones like GetEvent, works without launching
// the DBOS runtime.
//
// Example:
//
//	config := dbos.ClientConfig{
//	    DatabaseURL: "postgres://user:pass@localhost:5432/dbname",
//	}
//	client, err := dbos.NewClient(context.Background(), config)
//	if err != nil {
//	    log.Fatal(err)
//	}
func NewClient(ctx context.Context, config ClientConfig) (Client, error) {
	appName := config.AppName
	if appName == "" {
		appName = "dbos-client" // Connection label only
	}
	dbosCtx, err := NewContext(ctx, Config{
		DatabaseURL:                    config.DatabaseURL,
		DatabaseSchema:                 config.DatabaseSchema,
		AppName:                        appName,
		Logger:                         config.Logger,
		SystemDBPool:                   config.SystemDBPool,
		SQLiteSystemDB:                 config.SQLiteSystemDB,
		Serializer:                     config.Serializer,
		SystemDBStartupTimeout:         config.SystemDBStartupTimeout,
		SystemDBIdleTransactionTimeout: config.SystemDBIdleTransactionTimeout,
		Sharding:                       config.Sharding,
		SkipMigrations:                 true, // Clients never own the schema
		namelessOwner:                  config.AppName == "",
		isClient:                       true,
	})
	if err != nil {
		return nil, err
	}

	asDBOSCtx, ok := dbosCtx.(*dbosContext)
	if ok {
		asDBOSCtx.systemDB.Launch(asDBOSCtx)
	}

	return dbosCtx, nil
}

// ownerAppName is the application this handle acts for; empty if nameless.
func (c *dbosContext) ownerAppName() string {
	if c.config.namelessOwner {
		return ""
	}
	return c.config.AppName
}

// Resolve an owning application name: explicit if provided, otherwise this context's.
// This is mostly a backward-compatibility solver. Functions like CreateSchedule
// which previously didn't, now accept an application name.
func (c *dbosContext) requestedOwner(explicit string) *string {
	if explicit != "" {
		return &explicit
	}
	if name := c.ownerAppName(); name != "" {
		return &name
	}
	return nil
}

// Launch initializes and starts the DBOS runtime components including the system database
// and conductor (if configured), recovers any pending workflows on this executor (unless
// Conductor is configured, in which case Conductor drives recovery), then starts the queue
// runner and workflow scheduler.
//
// Returns an error if the context is already launched or if any component fails to start.
// A failed Launch is terminal: the context is torn down (system database closed) and
// cannot be relaunched — create a new context with NewContext and Launch that instead.
//
// Launch must be called on the Context returned by NewContext. Contexts derived from it
// (WithValue, WithTimeout, From, ...) return an error.
func (c *dbosContext) Launch() error {
	if !c.root {
		return models.NewInitializationError("Launch must be called on the Context returned by NewContext, not a derived one")
	}
	if !c.launchStarted.CompareAndSwap(false, true) {
		return models.NewInitializationError("DBOS is already launched")
	}
	launchCompleted := false
	defer func() {
		if !launchCompleted {
			if err := c.Shutdown(c, _LAUNCH_ROLLBACK_TIMEOUT); err != nil {
				c.logger.Error("Failed to roll back launch", "error", err)
			}
		}
	}()

	// Start the system database
	c.systemDB.Launch(c)

	// Register the current application version and warn if it is not the latest.
	if err := sysdb.Retry(c, func() error {
		return c.systemDB.CreateApplicationVersion(c, c.applicationVersion, c.requestedOwner(""))
	}, sysdb.WithRetrierLogger(c.logger)); err != nil {
		c.logger.Warn("Failed to register application version", "version", c.applicationVersion, "error", err)
	} else if latest, err := sysdb.RetryWithResult(c, func() (*VersionInfo, error) {
		return c.systemDB.GetLatestApplicationVersion(c, nil, "")
	}, sysdb.WithRetrierLogger(c.logger)); err != nil {
		c.logger.Warn("Failed to fetch latest application version", "error", err)
	} else if latest.Name != c.applicationVersion {
		c.logger.Warn("Current application version is not the latest",
			"current", c.applicationVersion, "latest", latest.Name)
	}

	// Recover local pending workflows before starting the queue runner so
	// recovered workflows are not racing a fresh dequeue pass. When Conductor
	// is configured it drives recovery, so the executor does not recover itself.
	if c.conductor == nil {
		recoveryHandles, err := recoverPendingWorkflows(c, []string{c.executorID})
		if err != nil {
			return models.NewInitializationError(fmt.Sprintf("failed to recover pending workflows during launch: %v", err))
		}
		if len(recoveryHandles) > 0 {
			c.logger.Info("Recovered pending workflows", "count", len(recoveryHandles))
		} else {
			c.logger.Debug("No pending workflows to recover")
		}
	} else {
		c.logger.Debug("Skipping self-recovery: Conductor is configured")
	}

	// Start the queue runner in a goroutine
	go func() {
		c.queueRunner.run(c)
	}()
	c.queueRunnerStarted.Store(true)
	c.logger.Debug("Queue runner started")

	// Start auto-upgrade if any workflow enrolled.
	if err := c.startAutoUpgrade(); err != nil {
		return err
	}

	// Start the cron scheduler.
	c.getWorkflowScheduler().Start()
	c.workflowSchedulerStarted.Store(true)
	c.logger.Debug("Workflow scheduler started")

	// Start the dynamic schedule reconciler. It polls the schedules table every
	// _SCHEDULE_POLL_INTERVAL and reconciles cron entries against DB state.
	c.scheduleReconcilerWg.Add(1)
	go func() {
		defer c.scheduleReconcilerWg.Done()
		c.runScheduleReconciler()
	}()

	c.workflowTimeoutsMonitorWg.Add(1)
	go func() {
		defer c.workflowTimeoutsMonitorWg.Done()
		c.runWorkflowTimeoutsMonitor()
	}()

	// Start the conductor if it has been initialized
	if c.conductor != nil {
		c.conductor.Launch()
		c.logger.Debug("Conductor started")
	}

	c.logger.Info("DBOS launched", "app_version", c.applicationVersion, "executor_id", c.executorID)
	c.launched.Store(true)
	launchCompleted = true
	return nil
}

// Shutdown gracefully shuts down the DBOS runtime by performing a complete, ordered cleanup
// of all system components. The shutdown sequence includes:
//
// 1. Cancels the context to signal all resources and workflows to stop.
// In-flight workflows observe the cancellation and unwind, but are not
// durably cancelled: their status rows are left PENDING so they are
// recovered on the next launch rather than marked CANCELLED.
// 2. Stops auto-upgrade, if a workflow enrolled
// 3. Waits for the queue runner to complete processing
// 4. Stops the workflow scheduler and waits for scheduled jobs to finish
// 5. Waits for in-flight workflows to finish unwinding
// 6. Shuts down conductor
// 7. Shuts down the system database connection pool and notification listener
// 8. Marks the context as not launched
//
// Each step respects the provided timeout. If any component doesn't shut down within the timeout,
// a warning is logged and the shutdown continues to the next component.
//
// Shutdown is a permanent, one-shot operation and should be called once, when the
// application is terminating: only the first call performs the shutdown and reports
// its result; subsequent calls return nil immediately without waiting for it.
//
// Shutdown must be called on the Context returned by NewContext. Contexts derived from it
// (WithValue, WithTimeout, From, ...) return an error.
func (c *dbosContext) Shutdown(_ Client, timeout time.Duration) error {
	if !c.root {
		return models.NewInitializationError("Shutdown must be called on the Context returned by NewContext, not a derived one")
	}
	if !c.shutdownStarted.CompareAndSwap(false, true) {
		return nil
	}
	c.logger.Debug("Shutting down DBOS context")

	// Resources still running when their timeout expired.
	var pending []string

	c.ctxCancelFunc(errShutdown)

	// Stop auto-upgrade first so it releases its lock it if holds one.
	if c.autoUpgrader != nil {
		c.logger.Debug("Stopping auto-upgrade")
		if err := c.autoUpgrader.stop(timeout); err != nil {
			pending = append(pending, "auto-upgrade")
		}
	}

	// Stop workflow producers before draining in-flight workflows. Producers
	// (.e.g, queue runner) call RunWorkflow, which calls workflowsWg.Add(1);
	// waiting on the WaitGroup before they finish races with those Adds.
	reconcilerDone := make(chan struct{})
	go func() {
		c.scheduleReconcilerWg.Wait()
		close(reconcilerDone)
	}()
	select {
	case <-reconcilerDone:
		c.logger.Debug("Schedule reconciler completed")
	case <-time.After(timeout):
		c.logger.Warn("Timeout waiting for schedule reconciler to complete", "timeout", timeout)
		pending = append(pending, "schedule reconciler")
	}

	monitorDone := make(chan struct{})
	go func() {
		c.workflowTimeoutsMonitorWg.Wait()
		close(monitorDone)
	}()
	select {
	case <-monitorDone:
		c.logger.Debug("Workflow timeouts monitor completed")
	case <-time.After(timeout):
		c.logger.Warn("Timeout waiting for workflow timeouts monitor to complete", "timeout", timeout)
		pending = append(pending, "workflow timeouts monitor")
	}

	// Wait for queue runner to finish
	if c.queueRunner != nil && c.queueRunnerStarted.Load() {
		c.logger.Debug("Waiting for queue runner to complete")
		select {
		case <-c.queueRunner.completionChan:
			c.logger.Debug("Queue runner completed")
			c.queueRunnerStarted.Store(false)
		case <-time.After(timeout):
			c.logger.Warn("Timeout waiting for queue runner to complete", "timeout", timeout)
			pending = append(pending, "queue runner")
		}
	}

	// Stop the workflow scheduler and wait until all scheduled workflows are done
	if c.workflowScheduler != nil && c.workflowSchedulerStarted.Load() {
		c.logger.Debug("Stopping workflow scheduler")
		ctx := c.workflowScheduler.Stop()
		c.workflowSchedulerStarted.Store(false)

		select {
		case <-ctx.Done():
			c.logger.Debug("All scheduled jobs completed")
		case <-time.After(timeout):
			c.logger.Warn("Timeout waiting for jobs to complete. Moving on", "timeout", timeout)
			pending = append(pending, "workflow scheduler")
		}
	}

	// Now that all producers are stopped, wait for in-flight workflows to finish
	c.logger.Debug("Waiting for all workflows to finish")
	done := make(chan struct{})
	go func() {
		c.workflowsWg.Wait()
		close(done)
	}()
	select {
	case <-done:
		c.logger.Debug("All workflows completed")
	case <-time.After(timeout):
		c.logger.Warn("Timeout waiting for workflows to complete", "timeout", timeout)
		pending = append(pending, "workflows")
	}

	// Shutdown the conductor
	if c.conductor != nil {
		c.logger.Debug("Shutting down conductor")
		if err := c.conductor.Shutdown(timeout); err != nil {
			pending = append(pending, "conductor")
		}
	}

	// Close the system database
	if c.systemDB != nil {
		c.logger.Debug("Shutting down system database")
		for _, p := range c.systemDB.Shutdown(c, timeout) {
			pending = append(pending, "system database "+p)
		}
	}

	c.launched.Store(false)

	if len(pending) > 0 {
		c.shutdownStarted.Store(false)
		return fmt.Errorf("shutdown timed out after %v waiting for: %s", timeout, strings.Join(pending, ", "))
	}
	return nil
}

// getBinaryHash computes and returns the SHA-256 hash of the current executable.
// This is used for application versioning to ensure workflow compatibility across deployments.
// Returns the hexadecimal representation of the hash or an error if the executable cannot be read.
func getBinaryHash() (string, error) {
	execPath, err := os.Executable()
	if err != nil {
		return "", err
	}

	execPath, err = filepath.EvalSymlinks(execPath)
	if err != nil {
		return "", fmt.Errorf("resolve self path: %w", err)
	}

	fi, err := os.Lstat(execPath)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("executable is not a regular file")
	}

	file, err := os.Open(execPath) // #nosec G304 -- opening our own executable, not user-supplied
	if err != nil {
		return "", err
	}
	defer file.Close()

	hasher := sha256.New()
	if _, err := io.Copy(hasher, file); err != nil {
		return "", err
	}

	return hex.EncodeToString(hasher.Sum(nil)), nil
}

func computeApplicationVersion(appName string) string {
	hash, err := getBinaryHash()
	if err != nil {
		fmt.Printf("DBOS: Failed to compute binary hash: %v\n", err)
		return ""
	}
	// Include the app name so same-binary peers under different names get distinct versions.
	hasher := sha256.New()
	hasher.Write([]byte(hash))
	hasher.Write([]byte(appName))
	return hex.EncodeToString(hasher.Sum(nil))
}

// getDBOSVersion returns the version of the DBOS module
func getDBOSVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/dbos-inc/dbos-transact-golang" {
				return dep.Version
			}
		}
		// If running as main module, return main module version
		if info.Main.Path == "github.com/dbos-inc/dbos-transact-golang" {
			return info.Main.Version
		}
	}
	return "unknown"
}

// Launch launches the DBOS runtime using the provided Context.
// This is a package-level wrapper for the Context.Launch() method.
//
// Example:
//
//	ctx, err := dbos.NewContext(context.Background(), config)
//	if err != nil {
//	    log.Fatal(err)
//	}
//
//	if err := dbos.Launch(ctx); err != nil {
//	    log.Fatal(err)
//	}
func Launch(ctx Context) error {
	if ctx == nil {
		return fmt.Errorf("ctx cannot be nil")
	}
	return ctx.Launch()
}

// Shutdown gracefully shuts down all DBOS resources using the provided Client
// or Context and timeout.
// This is a package-level wrapper for the Client.Shutdown() method.
//
// Example:
//
//	ctx, err := dbos.NewContext(context.Background(), config)
//	if err != nil {
//	    log.Fatal(err)
//	}
//	defer dbos.Shutdown(ctx, 30*time.Second)
//
// It returns an error if the timeout expired before all dependent resources
// (queue runner, workflow scheduler, in-flight workflows, ...) stopped; those
// resources may still be running when it returns.
func Shutdown(c Client, timeout time.Duration) error {
	if c == nil {
		return nil
	}
	return c.Shutdown(c, timeout)
}

// clearRegistries clears the workflow registry,
// allowing re-registration of workflows. Intended for testing only.
func clearRegistries(ctx Context) {
	c, ok := ctx.(*dbosContext)
	if !ok {
		return
	}
	c.ClearRegistries()
}
