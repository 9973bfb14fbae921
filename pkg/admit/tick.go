package admit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// Tick admits the deploy of one tick of a recurring schedule, with id
// <schedule>@<UTC time>: every check again, governance included, as the
// schedule's creator (a static token's only while it is configured). A refusal comes back as an error whose text names the
// first problem (it is recorded on the schedule as its last error).
func (a *Admitter) Tick(ctx context.Context, sc *store.Schedule, id string) (*Admission, error) {
	d, err := descriptor.Parse(sc.Descriptor)
	if err != nil {
		return nil, err
	}
	d.Schedule = nil
	who := manent.Identity{Subject: sc.Requester, Groups: sc.RequesterGroups}
	if name, ok := strings.CutPrefix(sc.Requester, "token:"); ok && a.cfg.Tokens != nil {
		// A static token's schedule deploys while the token exists, with
		// the token's groups of now. An OIDC creator's groups are those
		// of the creation: the server cannot ask the issuer later.
		groups, ok := a.cfg.Tokens.TokenGroups(name)
		if !ok {
			return nil, fmt.Errorf("the schedule's creator %s is no longer a token of this server (auth.tokens): a schedule deploys as its creator, "+
				"and not once the creator's token is revoked; delete it (manent schedules delete %s) and create it again with a token that exists", sc.Requester, sc.ID)
		}
		who.Groups = groups
	}
	adm, err := a.Admit(ctx, Request{Descriptor: d, ID: id, RequestID: id, Identity: who, Tick: true})
	if err != nil {
		if me := (*manent.Error)(nil); errors.As(err, &me) && len(me.Fields) > 0 {
			return nil, fmt.Errorf("%s: %s", me.Message, me.Fields[0].Message)
		}
		return nil, err
	}
	return adm, nil
}
