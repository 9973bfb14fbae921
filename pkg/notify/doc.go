// Package notify tells the outside world about deploys (SPEC §8.1
// "Callbacks", SPEC §5 notify:started and the conclusion): signed HTTP
// callbacks that follow the Standard Webhooks specification, and chat
// messages to Slack-compatible incoming webhooks.
//
// Three layers:
//
//   - Sign, ParseSecret and the header names implement the signature of
//     Standard Webhooks: webhook-signature is "v1,<base64 HMAC-SHA256 of
//     <id>.<timestamp>.<body>>", keyed with the secret given as whsec_<base64>.
//   - Sender makes one attempt to deliver one event and classifies the
//     outcome: nil for a 2xx, a permanent error (plugin.IsPermanent) for a
//     refusal retrying cannot fix (4xx other than 408 and 429, a redirect, an
//     address the callback policy refuses), a plain error otherwise. Sender
//     sends through a pkg/egress client, so a callback never reaches an
//     address the policy refuses, even after DNS rebinding. Chat renders and
//     posts chat messages through a Sender.
//   - Outbox is the durable outbox: every delivery is its own DBOS workflow
//     on its own queue, one DBOS step per attempt and a durable sleep
//     between attempts, so a crash loses no event, retries keep the
//     webhook-id, and a slow receiver never holds a deploy step.
//
// The package imports pkg/egress, pkg/manent, pkg/plugin, pkg/retry (the
// backoff between attempts) and pkg/urlpolicy of this module, and DBOS; it knows nothing of the engine, the store or HTTP
// serving.
package notify
