package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/retry"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// Outbox defaults.
const (
	// DefaultQueue is the DBOS queue of deliveries, apart from the deploy
	// queue so a delivery never takes a deploy's slot.
	DefaultQueue = "manent-notify"
	// WorkflowName is the DBOS name of the delivery workflow.
	WorkflowName = "manent.notify.deliver"

	// DefaultMaxAttempts, DefaultBackoffBase and DefaultBackoffMax are a
	// delivery's retry policy when it sets none (see Delivery.Backoff).
	DefaultMaxAttempts = 10
	DefaultBackoffBase = 5 * time.Second
	DefaultBackoffMax  = 10 * time.Minute

	// DefaultWorkerConcurrency bounds the deliveries one process runs at
	// once; a delivery waiting between attempts counts, so it is generous.
	DefaultWorkerConcurrency = 64
	// DefaultReceiverConcurrency bounds the deliveries in flight to one
	// receiver (scheme, host and port; a chat channel) across all workers,
	// so a dead receiver holds few slots and a recovering one is not flooded.
	DefaultReceiverConcurrency = 4
	// DefaultPollInterval is the queue's polling interval.
	DefaultPollInterval = 200 * time.Millisecond
)

// Kind is what a delivery posts.
type Kind string

// Delivery kinds.
const (
	// KindCallback is a signed Standard Webhooks callback to URL.
	KindCallback Kind = "callback"
	// KindChat is a chat message to Channel, whose URL the server configures.
	KindChat Kind = "chat"
)

// Delivery is one event to deliver to one receiver: the input of the
// delivery workflow, saved by DBOS when it is enqueued.
type Delivery struct {
	// ID is the webhook-id and the DBOS workflow ID: stable per event and
	// receiver, the same on every retry and on a replayed enqueue (see
	// DeliveryID). It starts with "<deploy id>." so Deliveries finds it.
	ID       string `json:"id"`
	DeployID string `json:"deploy_id"`
	Kind     Kind   `json:"kind"`
	// URL is the callback URL (KindCallback).
	URL string `json:"url,omitempty"`
	// Channel is the chat channel (KindChat).
	Channel string `json:"channel,omitempty"`
	Event   Event  `json:"event"`
	// MaxAttempts bounds the attempts; 0 means DefaultMaxAttempts.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// BackoffBase is the wait after the first failed attempt, doubled after
	// each further one up to BackoffMax; 0 means the defaults. A receiver's
	// Retry-After is honoured up to BackoffMax.
	BackoffBase time.Duration `json:"backoff_base,omitempty"`
	BackoffMax  time.Duration `json:"backoff_max,omitempty"`
	// Priority orders the deliveries waiting for one receiver: lower
	// first, then oldest first (Rank).
	Priority uint `json:"priority,omitempty"`
}

// Rank sets the priority of the deliveries of one event of a deploy: its
// seq-th event (increasing over the deploy's life) to a deploy with
// receivers callbacks and chat channels. A receiver shared by many deploys
// then serves them in turn — the first events of every deploy before the
// later ones of any — instead of in arrival order, where one submission
// with 20 callbacks to it and hundreds of step events held everyone's
// callbacks for hours. A deploy's own events keep their order.
func Rank(ds []Delivery, seq, receivers int) {
	if seq < 0 {
		seq = 0
	}
	receivers = max(receivers, len(ds), 1)
	for i := range ds {
		ds[i].Priority = uint(seq*receivers + i)
	}
}

func (d Delivery) maxAttempts() int {
	if d.MaxAttempts > 0 {
		return d.MaxAttempts
	}
	return DefaultMaxAttempts
}

// Backoff returns the wait after failed attempt n (1-based): BackoffBase
// doubling, at most BackoffMax (the defaults when 0), and at least the
// receiver's Retry-After up to BackoffMax. The wait itself is a durable
// dbos.Sleep.
func (d Delivery) Backoff(n int, retryAfter time.Duration) time.Duration {
	p := retry.Policy{Initial: d.BackoffBase, Max: d.BackoffMax}
	if p.Initial <= 0 {
		p.Initial = DefaultBackoffBase
	}
	if p.Max <= 0 {
		p.Max = DefaultBackoffMax
	}
	return min(max(p.Delay(n), retryAfter), p.Max)
}

// partition is the receiver a delivery goes to: its queue partition.
func (d Delivery) partition() string {
	if d.Kind == KindChat {
		return "chat/" + d.Channel
	}
	if u, err := url.Parse(d.URL); err == nil && u.Host != "" {
		return strings.ToLower(u.Scheme + "://" + u.Host)
	}
	return d.URL
}

func (d Delivery) validate() error {
	switch {
	case d.ID == "":
		return errors.New("delivery without an id")
	case d.Kind == KindCallback && d.URL == "":
		return fmt.Errorf("callback delivery %s without a URL", d.ID)
	case d.Kind == KindChat && d.Channel == "":
		return fmt.Errorf("chat delivery %s without a channel", d.ID)
	case d.Kind != KindCallback && d.Kind != KindChat:
		return fmt.Errorf("delivery %s has unknown kind %q", d.ID, d.Kind)
	}
	return nil
}

// DeliveryID returns the id of the delivery of the event named key of a
// deploy to receiver: "<deployID>.<key>.<receiver>", each byte of key and
// receiver other than a letter, digit or one of "._:-" written as %XX
// ("deploy[eu 1]" → "deploy%5Beu%201%5D"). The escape is one-to-one: two
// events never share an id (with "_" for every such byte, the waves
// "eu 1" and "eu_1" did, and DBOS, keeping one workflow per id, never
// sent the second's callbacks). key must name the event the same way
// whenever it is produced again (a step replayed after a crash):
// "started", "step.deploy", "step.deploy[eu-1]", "finished".
func DeliveryID(deployID, key, receiver string) string {
	return deployID + "." + idSafe(key) + "." + idSafe(receiver)
}

// idSafe escapes s for a delivery id (DeliveryID).
func idSafe(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// Fanout returns the deliveries of one event of a deploy: one per callback
// that wants ev.Type (receiver "cb<index>"), and, for started and finished
// events, one per chat channel (receiver "chat-<channel>"). key names the
// event within the deploy (see DeliveryID).
func Fanout(ev Event, key string, callbacks []Callback, channels []string) []Delivery {
	var out []Delivery
	id := ev.Deployment.ID
	for i, cb := range callbacks {
		if !cb.Wants(ev.Type) {
			continue
		}
		out = append(out, Delivery{
			ID: DeliveryID(id, key, fmt.Sprintf("cb%d", i)), DeployID: id,
			Kind: KindCallback, URL: cb.URL, Event: ev,
		})
	}
	if ChatWants(ev.Type) {
		for _, ch := range channels {
			out = append(out, Delivery{
				ID: DeliveryID(id, key, "chat-"+ch), DeployID: id,
				Kind: KindChat, Channel: ch, Event: ev,
			})
		}
	}
	return out
}

// Attempt is the recorded outcome of one delivery attempt: the output of
// the attempt's DBOS step.
type Attempt struct {
	N          int       `json:"n"`
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms"`
	// Status is the receiver's HTTP status, 0 when there was no answer.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Permanent is set when retrying cannot help: the delivery stops.
	Permanent  bool          `json:"permanent,omitempty"`
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}

// OK reports whether the attempt delivered the event.
func (a Attempt) OK() bool { return a.Error == "" }

// DeliveryState is the state of a delivery.
type DeliveryState string

// Delivery states.
const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	DeliveryFailed    DeliveryState = "failed"
	DeliveryCancelled DeliveryState = "cancelled"
)

// DeliveryResult is the delivery workflow's output. A delivery that failed
// for good is a result with State DeliveryFailed, not a workflow error.
type DeliveryResult struct {
	State    DeliveryState `json:"state"`
	Attempts int           `json:"attempts"`
	Status   int           `json:"status,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	// Queue is the DBOS queue name; "" means DefaultQueue.
	Queue string
	// Callbacks signs and sends callbacks; nil fails callback deliveries
	// permanently.
	Callbacks *Sender
	// Chat sends chat messages; nil fails chat deliveries permanently.
	Chat *Chat
	// WorkerConcurrency, ReceiverConcurrency and PollInterval tune the
	// queue; 0 means the defaults.
	WorkerConcurrency   int
	ReceiverConcurrency int
	PollInterval        time.Duration
	// Logger receives failed attempts; nil discards.
	Logger *slog.Logger
}

// Outbox is the durable outbox of callbacks and chat messages. Each
// delivery is a DBOS workflow on the outbox's own queue: one step per
// attempt, recording its outcome, and a durable sleep between attempts, so a
// crash at any point resumes the retries with the same webhook-id, and no
// deploy step waits on a receiver.
type Outbox struct {
	cfg   OutboxConfig
	queue dbos.Queue
	log   *slog.Logger
}

// NewOutbox registers the delivery queue and workflow on ctx. Call it
// before dbos.Launch, once per DBOS context.
func NewOutbox(ctx dbos.Context, cfg OutboxConfig) (*Outbox, error) {
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if cfg.WorkerConcurrency <= 0 {
		cfg.WorkerConcurrency = DefaultWorkerConcurrency
	}
	if cfg.ReceiverConcurrency <= 0 {
		cfg.ReceiverConcurrency = DefaultReceiverConcurrency
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	o := &Outbox{cfg: cfg, log: cfg.Logger}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	q, err := dbos.RegisterQueue(ctx, cfg.Queue,
		dbos.WithWorkerConcurrency(cfg.WorkerConcurrency),
		dbos.WithPartitionConcurrency(cfg.ReceiverConcurrency),
		dbos.WithQueueBasePollingInterval(cfg.PollInterval))
	if err != nil {
		return nil, fmt.Errorf("register queue %s: %w", cfg.Queue, err)
	}
	o.queue = q
	dbos.RegisterWorkflow(ctx, o.deliver, dbos.WithWorkflowName(WorkflowName))
	return o, nil
}

// Queue returns the outbox's DBOS queue name.
func (o *Outbox) Queue() string { return o.cfg.Queue }

// Enqueue makes d durable: its workflow runs on the outbox queue soon after.
// Enqueueing the same d.ID again is a no-op, so a step that enqueues and is
// replayed after a crash sends nothing twice.
//
// ctx is either the deploy workflow's context, between steps (DBOS then
// records the enqueue as a step of the deploy), or the engine's root DBOS
// context, also from inside a step (a plain insert; pass
// dbos.WithEnqueueTransaction(tx) in opts to commit it with the step's own
// writes). Never a request-scoped context.
func (o *Outbox) Enqueue(ctx dbos.Context, d Delivery, opts ...dbos.EnqueueOption) error {
	if err := d.validate(); err != nil {
		return err
	}
	all := []dbos.EnqueueOption{
		dbos.WithEnqueueWorkflowID(d.ID),
		dbos.WithEnqueueQueuePartitionKey(d.partition()),
		dbos.WithEnqueueAttributes(map[string]any{
			"deploy_id": d.DeployID, "kind": string(d.Kind), "event": string(d.Event.Type),
		}),
	}
	if d.Priority > 0 {
		all = append(all, dbos.WithEnqueuePriority(d.Priority))
	}
	all = append(all, opts...)
	if _, err := dbos.Enqueue[DeliveryResult](ctx, o.cfg.Queue, WorkflowName, d, all...); err != nil {
		return fmt.Errorf("enqueue delivery %s: %w", d.ID, err)
	}
	return nil
}

// EnqueueAll enqueues every delivery, stopping at the first error.
func (o *Outbox) EnqueueAll(ctx dbos.Context, ds []Delivery, opts ...dbos.EnqueueOption) error {
	for _, d := range ds {
		if err := o.Enqueue(ctx, d, opts...); err != nil {
			return err
		}
	}
	return nil
}

// attemptStep names the DBOS step of attempt n.
func attemptStep(n int) string { return fmt.Sprintf("attempt-%d", n) }

// deliver is the delivery workflow.
func (o *Outbox) deliver(ctx dbos.Context, d Delivery) (DeliveryResult, error) {
	maxN := d.maxAttempts()
	var last Attempt
	for n := 1; n <= maxN; n++ {
		a, err := dbos.RunAsStep(ctx, func(sctx context.Context) (Attempt, error) {
			return o.attempt(sctx, d, n)
		}, dbos.WithStepName(attemptStep(n)))
		if err != nil {
			// Interrupted (shutdown): the workflow stays PENDING and
			// recovery runs this attempt again.
			return DeliveryResult{}, err
		}
		last = a
		if a.OK() {
			return DeliveryResult{State: DeliveryDelivered, Attempts: n, Status: a.Status}, nil
		}
		if a.Permanent || n == maxN {
			break
		}
		if _, err := dbos.Sleep(ctx, d.Backoff(n, a.RetryAfter)); err != nil {
			return DeliveryResult{}, err
		}
	}
	// Each failed attempt was logged; this says manent stopped trying.
	to := []any{"channel", d.Channel}
	if d.Kind == KindCallback {
		to = []any{"url", urlpolicy.Redact(d.URL)}
	}
	o.log.Error("delivery failed", append([]any{"delivery", d.ID, "kind", d.Kind, "attempts", last.N,
		"permanent", last.Permanent, "error", last.Error}, to...)...)
	return DeliveryResult{State: DeliveryFailed, Attempts: last.N, Status: last.Status, Error: last.Error}, nil
}

// attempt sends once and records the outcome as data. It returns an error
// only when ctx was cancelled, so the attempt is not recorded and runs again.
func (o *Outbox) attempt(ctx context.Context, d Delivery, n int) (Attempt, error) {
	start := time.Now()
	status, err := o.send(ctx, d)
	if err != nil && ctx.Err() != nil {
		return Attempt{}, err
	}
	a := Attempt{N: n, At: start.UTC(), DurationMS: time.Since(start).Milliseconds(), Status: status}
	if err != nil {
		a.Error = err.Error()
		a.Permanent = plugin.IsPermanent(err)
		var he *HTTPError
		if errors.As(err, &he) {
			a.RetryAfter = he.RetryAfter
		}
		o.log.Warn("delivery attempt failed", "delivery", d.ID, "kind", d.Kind, "attempt", n,
			"permanent", a.Permanent, "error", err)
	}
	return a, nil
}

// send makes one attempt and returns the receiver's status (0 without an
// answer).
func (o *Outbox) send(ctx context.Context, d Delivery) (int, error) {
	switch d.Kind {
	case KindCallback:
		if o.cfg.Callbacks == nil {
			return 0, plugin.Permanent(errors.New("callbacks are not configured on this server"))
		}
		return o.cfg.Callbacks.send(ctx, d.URL, d.Event, d.ID)
	case KindChat:
		if o.cfg.Chat == nil {
			return 0, plugin.Permanent(errors.New("chat is not configured on this server"))
		}
		return o.cfg.Chat.send(ctx, d.Channel, d.Event)
	}
	return 0, plugin.Permanent(fmt.Errorf("unknown delivery kind %q", d.Kind))
}

// DeliveryStatus is a delivery as `manent status` shows it.
type DeliveryStatus struct {
	ID    string    `json:"id"`
	Kind  Kind      `json:"kind"`
	Event EventType `json:"event"`
	Step  string    `json:"step,omitempty"`
	// URL is the callback URL without query, fragment or user information,
	// which may hold tokens.
	URL         string        `json:"url,omitempty"`
	Channel     string        `json:"channel,omitempty"`
	State       DeliveryState `json:"state"`
	Error       string        `json:"error,omitempty"`
	Attempts    []Attempt     `json:"attempts"`
	CreatedAt   time.Time     `json:"created_at"`
	CompletedAt *time.Time    `json:"completed_at,omitempty"`
}

// Deliveries lists the deliveries of a deploy, oldest first, with every
// recorded attempt. ctx is any DBOS context or client of the system
// database (not a workflow's).
func Deliveries(ctx dbos.Client, deployID string) ([]DeliveryStatus, error) {
	wfs, err := dbos.ListWorkflows(ctx,
		dbos.WithFilterWorkflowIDPrefix(deployID+"."),
		dbos.WithFilterName(WorkflowName),
		dbos.WithFilterLoadInput(true),
		dbos.WithFilterLoadOutput(true))
	if err != nil {
		return nil, fmt.Errorf("list deliveries of %s: %w", deployID, err)
	}
	out := make([]DeliveryStatus, 0, len(wfs))
	for _, wf := range wfs {
		var d Delivery
		if err := decodeStored(wf.Input, &d); err != nil {
			return nil, fmt.Errorf("delivery %s: input: %w", wf.ID, err)
		}
		ds := DeliveryStatus{
			ID: wf.ID, Kind: d.Kind, Event: d.Event.Type, URL: urlpolicy.Redact(d.URL), Channel: d.Channel,
			State: DeliveryPending, Attempts: []Attempt{}, CreatedAt: wf.CreatedAt,
		}
		if d.Event.Step != nil {
			ds.Step = d.Event.Step.Name
		}
		if !wf.CompletedAt.IsZero() {
			t := wf.CompletedAt
			ds.CompletedAt = &t
		}
		switch wf.Status {
		case dbos.WorkflowStatusSuccess:
			var res DeliveryResult
			if err := decodeStored(wf.Output, &res); err != nil {
				return nil, fmt.Errorf("delivery %s: output: %w", wf.ID, err)
			}
			ds.State, ds.Error = res.State, res.Error
		case dbos.WorkflowStatusCancelled:
			ds.State = DeliveryCancelled
		case dbos.WorkflowStatusError, dbos.WorkflowStatusMaxRecoveryAttemptsExceeded:
			ds.State = DeliveryFailed
			if wf.Error != nil {
				ds.Error = wf.Error.Error()
			} else {
				ds.Error = string(wf.Status)
			}
		}
		steps, err := dbos.GetWorkflowSteps(ctx, wf.ID, dbos.WithStepsLoadOutput(true))
		if err != nil {
			return nil, fmt.Errorf("delivery %s: steps: %w", wf.ID, err)
		}
		for _, s := range steps {
			if !strings.HasPrefix(s.StepName, "attempt-") || s.Error != nil {
				continue
			}
			var a Attempt
			if err := decodeStored(s.Output, &a); err != nil {
				return nil, fmt.Errorf("delivery %s: %s: %w", wf.ID, s.StepName, err)
			}
			ds.Attempts = append(ds.Attempts, a)
		}
		if ds.State == DeliveryPending && len(ds.Attempts) > 0 {
			ds.Error = ds.Attempts[len(ds.Attempts)-1].Error
		}
		out = append(out, ds)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// decodeStored decodes a value DBOS returns from a listing: the JSON text
// for the default serializer, or an already decoded value.
func decodeStored(v any, into any) error {
	switch s := v.(type) {
	case nil:
		return errors.New("no value recorded")
	case string:
		return json.Unmarshal([]byte(s), into)
	case *string:
		if s == nil {
			return errors.New("no value recorded")
		}
		return json.Unmarshal([]byte(*s), into)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
