package manent

// State is the lifecycle state of a deployment (SPEC §4). The names are a
// contract: users, scripts and the web page match on them.
type State string

// Waiting states: none of them holds a worker slot.
const (
	StateScheduled         State = "SCHEDULED"
	StateDelayed           State = "DELAYED"
	StateWaitingDependency State = "WAITING_DEPENDENCY"
	StateAwaitingApproval  State = "AWAITING_APPROVAL"
	StateEnqueued          State = "ENQUEUED"
)

// StatePending is the running state: a worker executes the deploy.
const StatePending State = "PENDING"

// Final states.
const (
	StateSuccess                     State = "SUCCESS"
	StateError                       State = "ERROR"
	StateCancelled                   State = "CANCELLED"
	StateRejected                    State = "REJECTED"
	StateExpired                     State = "EXPIRED"
	StateDependencyFailed            State = "DEPENDENCY_FAILED"
	StateMaxRecoveryAttemptsExceeded State = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
)

// States lists every state in lifecycle order.
var States = []State{
	StateScheduled, StateDelayed, StateWaitingDependency, StateAwaitingApproval,
	StateEnqueued, StatePending, StateSuccess, StateError, StateCancelled,
	StateRejected, StateExpired, StateDependencyFailed, StateMaxRecoveryAttemptsExceeded,
}

// Final reports whether no further transition can happen from s.
func (s State) Final() bool {
	switch s {
	case StateSuccess, StateError, StateCancelled, StateRejected, StateExpired,
		StateDependencyFailed, StateMaxRecoveryAttemptsExceeded:
		return true
	}
	return false
}

// Waiting reports whether s is a waiting state (SPEC §4, first table).
func (s State) Waiting() bool {
	switch s {
	case StateScheduled, StateDelayed, StateWaitingDependency, StateAwaitingApproval, StateEnqueued:
		return true
	}
	return false
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, k := range States {
		if k == s {
			return true
		}
	}
	return false
}

// StepState is the state of one recorded step as shown to users.
type StepState string

// Step states (SPEC §7).
const (
	StepPending StepState = "PENDING"
	StepRunning StepState = "RUNNING"
	StepSuccess StepState = "SUCCESS"
	StepError   StepState = "ERROR"
	StepSkipped StepState = "SKIPPED"
)

// Rollback outcomes (SPEC §4, §5).
const (
	RollbackNone      = ""
	RollbackCompleted = "completed"
	RollbackFailed    = "failed"
)
