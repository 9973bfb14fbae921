package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// AppendRollout records a wave's state as a `rollout` event.
func (s *Store) AppendRollout(ctx context.Context, id string, w manent.WaveStatus) error {
	if w.Time == nil {
		now := time.Now().UTC()
		w.Time = &now
	}
	return s.Tx(ctx, func(tx *sql.Tx) error {
		return s.AppendRolloutTx(ctx, tx, id, w)
	})
}

// AppendRolloutTx is AppendRollout in tx.
func (s *Store) AppendRolloutTx(ctx context.Context, tx *sql.Tx, id string, w manent.WaveStatus) error {
	if w.Time == nil {
		now := time.Now().UTC()
		w.Time = &now
	}
	_, err := s.appendEvent(ctx, tx, id, EventRollout, *w.Time, w)
	return err
}

// Rollout returns the last recorded state of each wave, in the order the
// waves first appeared.
func (s *Store) Rollout(ctx context.Context, id string) ([]manent.WaveStatus, error) {
	evs, err := s.Events(ctx, id, 0, []string{EventRollout}, 0)
	if err != nil {
		return nil, err
	}
	var out []manent.WaveStatus
	index := map[string]int{}
	for _, e := range evs {
		var w manent.WaveStatus
		if json.Unmarshal(e.Data, &w) != nil {
			continue
		}
		if i, ok := index[w.Name]; ok {
			// A later state keeps what an earlier one learnt: the gate's
			// outcome and its message, the end of the observation.
			prev := out[i]
			if w.Gate == "" {
				w.Gate = prev.Gate
				if w.Message == "" && prev.Gate == "failed" {
					w.Message = prev.Message
				}
			}
			if w.ObserveUntil == nil {
				w.ObserveUntil = prev.ObserveUntil
			}
			out[i] = w
			continue
		}
		index[w.Name] = len(out)
		out = append(out, w)
	}
	return out, nil
}
