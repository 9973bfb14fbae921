package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
)

// Chat posts deploy messages to Slack-compatible incoming webhooks (SPEC §8
// `chat`): one message when a deploy starts and one when it finishes, with
// the error and the rollback outcome.
type Chat struct {
	// Channels maps a channel name (as named by a descriptor's
	// `notify.chat`) to its incoming-webhook URL. The URLs are secrets: they
	// stay in the server configuration and are looked up at send time, never
	// written to the outbox.
	Channels map[string]string
	// Sender posts the messages (unsigned, through its client).
	Sender *Sender
}

// ChatWants reports whether chat messages are sent for events of type t:
// only for started and finished.
func ChatWants(t EventType) bool {
	return t == EventStarted || t == EventFinished
}

// Send posts the message for ev to channel once. An unknown channel is a
// permanent error.
func (c *Chat) Send(ctx context.Context, channel string, ev Event) error {
	_, err := c.send(ctx, channel, ev)
	return err
}

func (c *Chat) send(ctx context.Context, channel string, ev Event) (int, error) {
	url, ok := c.Channels[channel]
	if !ok || url == "" {
		return 0, plugin.Permanent(fmt.Errorf("chat channel %q is not configured on the server", channel))
	}
	if c.Sender == nil {
		return 0, plugin.Permanent(errors.New("chat has no sender"))
	}
	return c.Sender.postJSON(ctx, url, Message(ev))
}

// maxChatText keeps a text block under Slack's 3000-character limit.
const maxChatText = 2800

// Message renders ev as a Slack incoming-webhook payload: a plain `text`
// (the notification line, also what clients without blocks show) and
// `blocks` with the application, environment, version and state, the
// error, the rollback outcome and the deploy id.
func Message(ev Event) map[string]any {
	d := ev.Deployment
	headline := fmt.Sprintf("%s %s %s → %s: %s", icon(ev), esc(d.Application), esc(d.Version), esc(d.Environment), headState(ev))
	text := headline
	if d.Error != "" {
		text += " — " + esc(truncate(d.Error, 300))
	}
	if d.Rollback != "" {
		text += " (rollback " + esc(d.Rollback) + ")"
	}
	blocks := []any{
		section(headline),
		map[string]any{
			"type": "section",
			"fields": []any{
				mrkdwn("*Application*\n" + esc(d.Application)),
				mrkdwn("*Environment*\n" + esc(d.Environment)),
				mrkdwn("*Version*\n" + esc(d.Version)),
				mrkdwn("*State*\n" + esc(string(d.State))),
			},
		},
	}
	if d.Error != "" {
		blocks = append(blocks, section("*Error*\n```"+codeText(truncate(d.Error, maxChatText))+"```"))
	}
	if d.Rollback != "" {
		blocks = append(blocks, section("*Rollback* "+esc(d.Rollback)))
	}
	ctxLine := "Deploy `" + esc(d.ID) + "`"
	if d.RollbackOf != "" {
		ctxLine += " · rollback of `" + esc(d.RollbackOf) + "`"
	}
	if !ev.Timestamp.IsZero() {
		ctxLine += " · " + ev.Timestamp.UTC().Format(time.RFC3339)
	}
	blocks = append(blocks, map[string]any{"type": "context", "elements": []any{mrkdwn(ctxLine)}})
	return map[string]any{"text": text, "blocks": blocks}
}

func icon(ev Event) string {
	if ev.Type != EventFinished {
		return ":rocket:"
	}
	switch ev.Deployment.State {
	case manent.StateSuccess:
		return ":white_check_mark:"
	case manent.StateCancelled:
		return ":no_entry_sign:"
	}
	return ":x:"
}

func headState(ev Event) string {
	if ev.Type == EventStarted {
		return "started"
	}
	return "*" + esc(string(ev.Deployment.State)) + "*"
}

func section(text string) map[string]any {
	return map[string]any{"type": "section", "text": mrkdwn(text)}
}

func mrkdwn(text string) map[string]any {
	return map[string]any{"type": "mrkdwn", "text": text}
}

// esc escapes the three characters Slack's mrkdwn reserves.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// codeText escapes s for a ``` code block: mrkdwn has no escape for a
// backtick, so each is followed by a zero-width space — two of the error's
// backticks, or one before the closing fence, can no longer end the block
// early and leave the rest of the error to be read as markup.
func codeText(s string) string {
	return strings.ReplaceAll(esc(s), "`", "`\u200b")
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
