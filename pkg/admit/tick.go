package admit

import (
	"context"
	"errors"
	"fmt"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// Tick admits the deploy of one tick of a recurring schedule, with id
// <schedule>@<UTC time>: every check again, governance included, as the
// schedule's creator. A refusal comes back as an error whose text names the
// first problem (it is recorded on the schedule as its last error).
func (a *Admitter) Tick(ctx context.Context, sc *store.Schedule, id string) (*Admission, error) {
	d, err := descriptor.Parse(sc.Descriptor)
	if err != nil {
		return nil, err
	}
	d.Schedule = nil
	adm, err := a.Admit(ctx, Request{
		Descriptor: d, ID: id, RequestID: id,
		Identity: manent.Identity{Subject: sc.Requester, Groups: sc.RequesterGroups},
	})
	if err != nil {
		if me := (*manent.Error)(nil); errors.As(err, &me) && len(me.Fields) > 0 {
			return nil, fmt.Errorf("%s: %s", me.Message, me.Fields[0].Message)
		}
		return nil, err
	}
	return adm, nil
}
