package descriptor

import (
	"encoding/json"
	"fmt"
	"time"
)

// Descriptor is a parsed deploy.yml (SPEC §2). Field names follow the YAML.
type Descriptor struct {
	APIVersion  string            `json:"apiVersion" yaml:"apiVersion"`
	Application string            `json:"application" yaml:"application"`
	Environment string            `json:"environment" yaml:"environment"`
	Version     string            `json:"version" yaml:"version"`
	Artifact    Artifact          `json:"artifact" yaml:"artifact"`
	Parameters  map[string]any    `json:"parameters,omitempty" yaml:"parameters,omitempty"`
	Target      *Target           `json:"target,omitempty" yaml:"target,omitempty"`
	Secrets     map[string]string `json:"secrets,omitempty" yaml:"secrets,omitempty"`
	Health      []HealthCheck     `json:"health,omitempty" yaml:"health,omitempty"`
	Steps       []CustomStep      `json:"steps,omitempty" yaml:"steps,omitempty"`
	After       []string          `json:"after,omitempty" yaml:"after,omitempty"`
	Schedule    *Schedule         `json:"schedule,omitempty" yaml:"schedule,omitempty"`
	Rollback    *Rollback         `json:"rollback,omitempty" yaml:"rollback,omitempty"`
	Rollout     *Rollout          `json:"rollout,omitempty" yaml:"rollout,omitempty"`
	Callbacks   []Callback        `json:"callbacks,omitempty" yaml:"callbacks,omitempty"`
	Notify      *Notify           `json:"notify,omitempty" yaml:"notify,omitempty"`
	MaxRetries  *int              `json:"max_retries,omitempty" yaml:"max_retries,omitempty"`
	Source      *Source           `json:"source,omitempty" yaml:"source,omitempty"`
}

// Source says what the version was built from (SPEC §11.5): DORA lead time
// runs from CommittedAt to the end of the deploy.
type Source struct {
	Repository string `json:"repository,omitempty" yaml:"repository,omitempty"`
	Commit     string `json:"commit,omitempty" yaml:"commit,omitempty"`
	// CommittedAt is an RFC 3339 date-time with a time zone.
	CommittedAt string `json:"committed_at,omitempty" yaml:"committed_at,omitempty"`
}

// CommitTime returns CommittedAt as a time, and false when it is absent or
// not RFC 3339 (Parse refuses that).
func (s *Source) CommitTime() (time.Time, bool) {
	if s == nil || s.CommittedAt == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s.CommittedAt)
	return t, err == nil
}

// Artifact is what is released.
type Artifact struct {
	URL    string `json:"url" yaml:"url"`
	SHA256 string `json:"sha256,omitempty" yaml:"sha256,omitempty"`
}

// Target names the plugin that deploys and its configuration.
type Target struct {
	Plugin string         `json:"plugin" yaml:"plugin"`
	With   map[string]any `json:"with,omitempty" yaml:"with,omitempty"`
}

// HealthCheck is one endpoint the post-test step checks.
type HealthCheck struct {
	URL     string   `json:"url" yaml:"url"`
	Expect  int      `json:"expect,omitempty" yaml:"expect,omitempty"`
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	Retries int      `json:"retries,omitempty" yaml:"retries,omitempty"`
}

// CustomStep is a step of the descriptor placed before or after a known step.
type CustomStep struct {
	Name       string         `json:"name" yaml:"name"`
	Before     string         `json:"before,omitempty" yaml:"before,omitempty"`
	After      string         `json:"after,omitempty" yaml:"after,omitempty"`
	Plugin     string         `json:"plugin" yaml:"plugin"`
	With       map[string]any `json:"with,omitempty" yaml:"with,omitempty"`
	MaxRetries *int           `json:"max_retries,omitempty" yaml:"max_retries,omitempty"`
}

// Schedule delays a deploy (At) or makes it recurring (Cron); never both.
type Schedule struct {
	At   *time.Time `json:"at,omitempty" yaml:"at,omitempty"`
	Cron string     `json:"cron,omitempty" yaml:"cron,omitempty"`
}

// Rollback says whether and on which failed steps to compensate.
type Rollback struct {
	Enabled *bool    `json:"enabled,omitempty" yaml:"enabled,omitempty"`
	On      []string `json:"on,omitempty" yaml:"on,omitempty"`
}

// Rollout is a progressive rollout: waves or percentages, never both.
type Rollout struct {
	Waves       []Wave `json:"waves,omitempty" yaml:"waves,omitempty"`
	Percentages []int  `json:"percentages,omitempty" yaml:"percentages,omitempty"`
}

// Wave is one step of a rollout.
type Wave struct {
	Name     string   `json:"name" yaml:"name"`
	Targets  []string `json:"targets" yaml:"targets"`
	Observe  Duration `json:"observe,omitempty" yaml:"observe,omitempty"`
	Approval bool     `json:"approval,omitempty" yaml:"approval,omitempty"`
}

// Callback is an HTTP endpoint that receives signed events.
type Callback struct {
	URL    string   `json:"url" yaml:"url"`
	Events []string `json:"events,omitempty" yaml:"events,omitempty"`
}

// Notify names the chat channels (configured on the server) to post to.
type Notify struct {
	Chat []string `json:"chat,omitempty" yaml:"chat,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("5m", "30s").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\" or \"5m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = Duration(v)
	return nil
}
