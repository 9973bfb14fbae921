package notify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plugin"
)

func TestMessage(t *testing.T) {
	finished := func(state manent.State, errMsg, rollback string) notify.Event {
		ev := sampleEvent(notify.EventFinished)
		ev.Deployment.State, ev.Deployment.Error, ev.Deployment.Rollback = state, errMsg, rollback
		return ev
	}
	tests := []struct {
		name       string
		ev         notify.Event
		wantText   []string
		wantBlocks []string
		notBlocks  []string
	}{
		{
			name:       "started",
			ev:         sampleEvent(notify.EventStarted),
			wantText:   []string{":rocket:", "billing 1.4.2 → prod: started"},
			wantBlocks: []string{"*Application*\nbilling", "*Environment*\nprod", "*Version*\n1.4.2", "*State*\nPENDING", "Deploy `dpl_01TEST` · 2026-05-01T12:00:00Z"},
			notBlocks:  []string{"*Error*", "*Rollback*"},
		},
		{
			name:      "success",
			ev:        finished(manent.StateSuccess, "", ""),
			wantText:  []string{":white_check_mark:", "billing 1.4.2 → prod: *SUCCESS*"},
			notBlocks: []string{"*Error*", "*Rollback*"},
		},
		{
			name: "a rollback",
			ev: func() notify.Event {
				ev := finished(manent.StateSuccess, "", "")
				ev.Deployment.RollbackOf = "dpl_01PREV"
				return ev
			}(),
			wantBlocks: []string{"Deploy `dpl_01TEST` · rollback of `dpl_01PREV` · "},
		},
		{
			name:       "error with rollback",
			ev:         finished(manent.StateError, `step "post-test" failed: <healthz> returned 503 & more`, "completed"),
			wantText:   []string{":x:", "*ERROR*", `step "post-test" failed: &lt;healthz&gt; returned 503 &amp; more`, "(rollback completed)"},
			wantBlocks: []string{"*Error*", "*Rollback* completed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := notify.Message(tt.ev)
			text, _ := msg["text"].(string)
			for _, w := range tt.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("text %q lacks %q", text, w)
				}
			}
			blocks := strings.Join(blockTexts(msg["blocks"]), "\n---\n")
			for _, w := range tt.wantBlocks {
				if !strings.Contains(blocks, w) {
					t.Errorf("blocks %s lack %q", blocks, w)
				}
			}
			for _, w := range tt.notBlocks {
				if strings.Contains(blocks, w) {
					t.Errorf("blocks %s contain %q", blocks, w)
				}
			}
		})
	}
}

func TestMessageTruncatesLongErrors(t *testing.T) {
	ev := sampleEvent(notify.EventFinished)
	ev.Deployment.State, ev.Deployment.Error = "ERROR", strings.Repeat("x", 10000)
	raw, _ := json.Marshal(notify.Message(ev))
	if len(raw) > 6000 {
		t.Fatalf("message is %d bytes", len(raw))
	}
}

func TestChatSend(t *testing.T) {
	rcv := newReceiver(t, "", nil)
	chat := &notify.Chat{
		Channels: map[string]string{"deploys-prod": rcv.url("/services/T/B/x")},
		Sender:   notify.NewSender(loopback(), nil, time.Second),
	}
	if err := chat.Send(context.Background(), "deploys-prod", sampleEvent(notify.EventStarted)); err != nil {
		t.Fatal(err)
	}
	h := rcv.next(t, 5*time.Second)
	if h.Path != "/services/T/B/x" || h.ID != "" {
		t.Fatalf("chat request: path %q, webhook-id %q", h.Path, h.ID)
	}
	var msg struct {
		Text   string `json:"text"`
		Blocks []any  `json:"blocks"`
	}
	if err := json.Unmarshal(h.Body, &msg); err != nil || msg.Text == "" || len(msg.Blocks) == 0 {
		t.Fatalf("chat body %s: %v", h.Body, err)
	}
	err := chat.Send(context.Background(), "nope", sampleEvent(notify.EventStarted))
	if !plugin.IsPermanent(err) || !strings.Contains(err.Error(), `"nope" is not configured`) {
		t.Fatalf("unknown channel: %v", err)
	}
}

// blockTexts returns every "text" string of Slack blocks, in order.
func blockTexts(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"text", "fields", "elements"} {
			if s, ok := v[k].(string); ok {
				out = append(out, s)
			} else if v[k] != nil {
				out = append(out, blockTexts(v[k])...)
			}
		}
	case []any:
		for _, e := range v {
			out = append(out, blockTexts(e)...)
		}
	}
	return out
}

// An error holding backticks (a shell message quoting ```) stays inside the
// error's code block: the block ends at its own closing fence only, so the
// rest of the error is not formatted as Slack markup.
func TestMessageErrorCannotCloseItsCodeBlock(t *testing.T) {
	ev := sampleEvent(notify.EventFinished)
	ev.Deployment.State, ev.Deployment.Error = "ERROR", "script said ```\n*bold* and _it_ `x`"
	var errBlock string
	for _, b := range blockTexts(notify.Message(ev)["blocks"]) {
		if strings.HasPrefix(b, "*Error*\n") {
			errBlock = b
		}
	}
	body, ok := strings.CutPrefix(errBlock, "*Error*\n```")
	if !ok || !strings.HasSuffix(body, "```") {
		t.Fatalf("error block %q is not one code block", errBlock)
	}
	body = strings.TrimSuffix(body, "```")
	if strings.Contains(body, "``") || strings.HasSuffix(body, "`") {
		t.Fatalf("error block %q: the error's backticks can end the code block", errBlock)
	}
	if got := strings.ReplaceAll(body, "\u200b", ""); got != ev.Deployment.Error {
		t.Fatalf("error block shows %q, want the error %q (invisible separators aside)", got, ev.Deployment.Error)
	}
}
