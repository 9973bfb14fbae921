package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		want []time.Duration // Delay(1), Delay(2), …
	}{
		{"doubling with a cap", Policy{Initial: 100 * time.Millisecond, Max: time.Second},
			[]time.Duration{100e6, 200e6, 400e6, 800e6, 1e9, 1e9}},
		{"the cap is not a step", Policy{Initial: 5 * time.Second, Max: 12 * time.Second},
			[]time.Duration{5e9, 10e9, 12e9, 12e9}},
		{"factor 3, no cap", Policy{Initial: time.Second, Factor: 3},
			[]time.Duration{1e9, 3e9, 9e9, 27e9}},
		{"far attempts do not overflow", Policy{Initial: time.Hour},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.want {
				if got := tt.p.Delay(i + 1); got != want {
					t.Errorf("Delay(%d) = %s, want %s", i+1, got, want)
				}
			}
			if tt.want == nil {
				if got := tt.p.Delay(200); got <= 0 {
					t.Errorf("Delay(200) = %s", got)
				}
			}
		})
	}
}

func TestWaitJitter(t *testing.T) {
	p := Policy{Initial: time.Second, Jitter: 0.2}
	seen := map[time.Duration]bool{}
	for range 200 {
		w := p.Wait(1)
		if w < 800*time.Millisecond || w > 1200*time.Millisecond {
			t.Fatalf("Wait(1) = %s, want 1s ± 20 %%", w)
		}
		seen[w] = true
	}
	if len(seen) < 10 {
		t.Errorf("%d distinct waits in 200: no jitter", len(seen))
	}
}

func TestDo(t *testing.T) {
	fail := errors.New("fail")
	fast := Policy{Initial: time.Microsecond, Max: 10 * time.Microsecond}
	t.Run("until success", func(t *testing.T) {
		var n int
		err := fast.Do(context.Background(), func(i int) error {
			n = i
			if i < 3 {
				return fail
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Errorf("err %v after %d attempts", err, n)
		}
	})
	t.Run("attempts bound", func(t *testing.T) {
		p := fast
		p.Attempts = 4
		var n int
		err := p.Do(context.Background(), func(i int) error { n = i; return fail })
		if err != fail || n != 4 {
			t.Errorf("err %v after %d attempts, want fail after 4", err, n)
		}
	})
	t.Run("stop", func(t *testing.T) {
		var n int
		err := fast.Do(context.Background(), func(i int) error { n = i; return Stop(fail) })
		if err != fail || n != 1 {
			t.Errorf("err %v after %d attempts, want fail after 1", err, n)
		}
	})
	t.Run("time bound", func(t *testing.T) {
		p := fast
		p.For = 20 * time.Millisecond
		var n int
		err := p.Do(context.Background(), func(i int) error { n = i; return fail })
		if err != fail || n < 2 {
			t.Errorf("err %v after %d attempts", err, n)
		}
	})
	t.Run("after overrides the wait", func(t *testing.T) {
		p := Policy{Initial: time.Hour, Attempts: 2}
		var n int
		err := p.Do(context.Background(), func(i int) error { n = i; return After(fail, time.Microsecond) })
		if err != fail || n != 2 {
			t.Errorf("err %v after %d attempts", err, n)
		}
	})
	t.Run("context ends during a wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := Policy{Initial: time.Hour}
		err := p.Do(ctx, func(i int) error {
			cancel()
			return fail
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
}
