package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/reltime"
)

// pageData is what every template gets.
type pageData struct {
	Title string
	// Nav names the navigation entry of the page.
	Nav  string
	User *manent.Identity
	// CanAudit: the viewer holds audit.read, so the navigation links to
	// the audit log (it offers no page the API would refuse).
	CanAudit bool
	CSRF     string
	// Stream is the SSE URL the page follows (empty: none); Live is
	// "page" (reload the #live region on events) and Log says that log
	// lines are appended to #log.
	Stream string
	Live   bool
	Log    bool
	Data   any
	// Status is the HTTP status of an error page; Message is its text,
	// or Parts when it quotes what the request asked for (an API error).
	Status  int
	Message string
	Parts   []msgPart
}

// pageFunc fills a page for the signed-in viewer.
type pageFunc func(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error

var funcs = template.FuncMap{
	"lower": func(s any) string { return strings.ToLower(strings.ReplaceAll(fmt.Sprint(s), "_", "-")) },
	"human": func(s any) string {
		return strings.ToLower(strings.ReplaceAll(fmt.Sprint(s), "_", " "))
	},
	"ts": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		case *time.Time:
			if v == nil || v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return ""
	},
	"iso": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format(time.RFC3339)
		case *time.Time:
			if v != nil {
				return v.UTC().Format(time.RFC3339)
			}
		}
		return ""
	},
	"ago":      ago,
	"duration": stepDuration,
	// milli is t (a time.Time or *time.Time) for the script: isoMilli.
	"milli": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format(isoMilli)
		case *time.Time:
			if v != nil {
				return v.UTC().Format(isoMilli)
			}
		}
		return ""
	},
	// now is the server's clock, against which the script measures the
	// browser's.
	"now": time.Now,
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"join":      strings.Join,
	"hasPrefix": strings.HasPrefix,
	"rollback":  func(name string) bool { return strings.HasPrefix(name, "rollback") },
	"failing":   func(p clusterstate.Pod) []string { return p.Failures() },
	"final":     func(s manent.State) bool { return s.Final() },
	"why":       api.ActivityItem.Why,
	"ansi":      ansiSpans,
}

// ago prints how long ago t was by the CLI's rule (reltime.Format: "2m
// ago", "in 5m"), "—" for none. The page's script keeps it current from
// the element's datetime (static/app.js, the same rule).
func ago(t any) string {
	var at time.Time
	switch v := t.(type) {
	case time.Time:
		at = v
	case *time.Time:
		if v == nil {
			return "—"
		}
		at = *v
	}
	if at.IsZero() {
		return "—"
	}
	return reltime.Format(at, time.Now())
}

// isoMilli is the layout of the instants the script computes with (a
// running step's start, the page's now): RFC 3339 to the millisecond,
// which every browser's Date.parse reads.
const isoMilli = "2006-01-02T15:04:05.000Z07:00"

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// stepDuration prints how long a step ran (or runs so far).
func stepDuration(s manent.Step) string {
	if s.StartedAt == nil {
		return ""
	}
	end := time.Now()
	if s.FinishedAt != nil {
		end = *s.FinishedAt
	}
	d := end.Sub(*s.StartedAt)
	if d < time.Second {
		return strconv.Itoa(int(d.Milliseconds())) + "ms"
	}
	if d < time.Minute {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return roundDuration(d)
}

// parsePages parses layout.html with each page template.
// Templates write every address of the UI as {{base}}/…: base is the
// path prefix (web.path_prefix), "" at the root of the host; a static
// file's as {{asset "app.js"}} (assetPath).
func parsePages(prefix string) (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	base, err := template.New("layout.html").Funcs(funcs).Funcs(template.FuncMap{"base": func() string { return prefix },
		"asset": func(name string) string { return assetPath(prefix, name) }}).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("web template %s: %w", n, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes page name with status. A request with the header
// X-Manent-Fragment gets only the page's #live region.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, status int, p *pageData) {
	t := h.pages[name]
	which := "layout.html"
	if r.Header.Get("X-Manent-Fragment") != "" && t.Lookup("live") != nil {
		which = "live"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, which, p); err != nil {
		h.log.Error("web: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(showControls(buf.Bytes()))
}

// renderError shows an error page with status.
func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, v *viewer, status int, msg string) {
	p := &pageData{Title: http.StatusText(status), Status: status, Message: msg}
	if v != nil {
		p.User, p.CSRF, p.CanAudit = &v.Identity, v.sess.CSRF, h.can(v, auth.AuditRead, "", "")
	}
	h.render(w, r, "error", status, p)
}

// page wraps a page: it needs a signed-in viewer (others go to /login)
// and turns API errors into error pages with the API's status.
func (h *Handler) page(name string, fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := h.signedIn(r)
		if err != nil && !errors.Is(err, errNoSession) {
			h.uncheckedSession(w, r, err)
			return
		}
		if err != nil {
			to := h.prefix + "/login?next=" + url.QueryEscape(h.prefix+r.URL.RequestURI())
			if _, cerr := h.cookie(r, sessionCookie); cerr == nil {
				to += "&error=" + loginErrSessionEnded
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		p := &pageData{Nav: name, User: &v.Identity, CSRF: v.sess.CSRF, CanAudit: h.can(v, auth.AuditRead, "", "")}
		if err := fn(w, r, v, p); err != nil {
			if errors.Is(err, errRedirected) {
				return
			}
			h.fail(w, r, v, err)
			return
		}
		h.render(w, r, name, http.StatusOK, p)
	}
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		p := &pageData{Title: http.StatusText(ae.Status), Status: ae.Status, Parts: asData(ae.Detail, supplied(r))}
		if v != nil {
			p.User, p.CSRF, p.CanAudit = &v.Identity, v.sess.CSRF, h.can(v, auth.AuditRead, "", "")
		}
		h.render(w, r, "error", ae.Status, p)
		return
	}
	h.log.Error("web: page", "path", r.URL.Path, "error", err)
	h.renderError(w, r, v, http.StatusInternalServerError, "Something went wrong on the server; its log says what.")
}

// activityPage is how many deploys of one environment the activity page
// shows at once: 10,000 waiting deploys made a 6 MB page, reloaded whole
// at every event.
const activityPage = 50

// activityView is the activity page: every environment's first
// activityPage deploys, or one environment's (?environment=) from the
// deploy ?from= on.
type activityView struct {
	// Environment is the one environment shown, "" for all.
	Environment string
	Groups      []activityGroup
	// PageSize is activityPage, for the pager's links.
	PageSize int
}

// activityGroup is the deploys shown of one environment.
type activityGroup struct {
	Environment string
	Items       []api.ActivityItem
	// Total is how many run or wait there; First and Last number the
	// ones shown (from 1); Prev and Next link to the pages around them.
	Total, First, Last int
	Prev, Next         string
}

func (h *Handler) pageActivity(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	env := r.URL.Query().Get("environment")
	from, err := strconv.Atoi(r.URL.Query().Get("from"))
	if err != nil || from < 0 || from > math.MaxInt32 || env == "" {
		from = 0
	}
	if env != "" && !descriptor.ValidName(env) {
		// No environment has that name (the API refuses it as a filter,
		// 422): the page of an environment with nothing, the link's text
		// not repeated.
		p.Title, p.Data = "Activity", activityView{Environment: env, PageSize: activityPage}
		p.Stream, p.Live = h.prefix+"/events", true
		return nil
	}
	// The API cuts the page (?limit=, ?from=): the whole list of 10,000
	// waiting deploys is 4.8 MB to encode and decode at every reload.
	ask := func(from int) (api.ActivityResult, error) {
		q := url.Values{"limit": {strconv.Itoa(activityPage)}}
		if env != "" {
			q.Set("environment", env)
			q.Set("from", strconv.Itoa(from))
		}
		var res api.ActivityResult
		err := h.call(r, v, http.MethodGet, "/api/v1/activity?"+q.Encode(), nil, &res)
		return res, err
	}
	res, err := ask(from)
	if err != nil {
		return err
	}
	// Past the end (the list got shorter since the link was made): its
	// last page.
	if env != "" && from > 0 && len(res.Environments) == 1 && len(res.Environments[0].Items) == 0 && res.Environments[0].Total > 0 {
		from = (res.Environments[0].Total - 1) / activityPage * activityPage
		if res, err = ask(from); err != nil {
			return err
		}
	}
	av := activityView{Environment: env, PageSize: activityPage}
	for _, g := range res.Environments {
		if env != "" && g.Environment != env {
			continue
		}
		av.Groups = append(av.Groups, pageActivityGroup(g, from, h.prefix))
	}
	// The environment asked for is not repeated: only names the API
	// answered with are shown.
	p.Title, p.Data = "Activity", av
	p.Stream, p.Live = h.prefix+"/events", true
	return nil
}

// pageActivityGroup is one page of g's deploys, which the API cut from
// its deploy from (counted from 0); its links are under prefix.
func pageActivityGroup(g api.ActivityGroup, from int, prefix string) activityGroup {
	n, end := g.Total, from+len(g.Items)
	out := activityGroup{Environment: g.Environment, Items: g.Items, Total: n, First: from + 1, Last: end}
	link := func(at int) string {
		q := url.Values{"environment": {g.Environment}}
		if at > 0 {
			q.Set("from", strconv.Itoa(at))
		}
		return prefix + "/?" + q.Encode()
	}
	if from > 0 {
		out.Prev = link(max(from-activityPage, 0))
	}
	if end < n {
		out.Next = link(end)
	}
	return out
}

// deployView is the deploy page.
type deployView struct {
	D       manent.Deployment
	Lines   []manent.LogLine
	LastSeq int64
	// More: the log goes on past the page the server sent
	// (api.MaxLogPage lines or api.MaxLogPageBytes); a running deploy's
	// stream brings the rest, a final one's page says where it is.
	More       bool
	CanApprove bool
	// Submitter: the viewer submitted the deploy, and so may not approve
	// or reject it (the engine refuses; an approval is someone else's).
	Submitter bool
	// NotApprover: the viewer may approve in this environment, but the
	// governance rule names other approvers for this deploy.
	NotApprover bool
	CanCancel   bool
	Approved    bool // the viewer has approved already
	Approvals   int  // approvals recorded
	// MayNotApprove: the viewer does not hold deployment.approve on the
	// deploy's application/environment (the page says so while it waits).
	MayNotApprove bool
	// Wave is the rollout wave waiting for its approval (nil: none), with
	// WaveApprovals counted on it; CanApproveWave offers its buttons, and
	// WaveApproved says the viewer approved it already.
	Wave            *manent.WaveStatus
	WaveApprovals   int
	CanApproveWave  bool
	WaveApproved    bool
	WaveNotApprover bool
	// Approvers says who may decide: the governance rule's approvers, or
	// anyone who may approve here.
	Approvers string
	// MaxComment is the longest comment the API takes, in bytes.
	MaxComment int
	// Deliveries are the deploy's callbacks and chat messages, as
	// `manent status` lists them.
	Deliveries []delivery
}

// delivery is one callback or chat message of a deploy (the API's
// deliveries; the URL comes without its query, which may hold a token).
type delivery struct {
	Event    string            `json:"event"`
	Step     string            `json:"step"`
	URL      string            `json:"url"`
	Channel  string            `json:"channel"`
	State    string            `json:"state"`
	Error    string            `json:"error"`
	Attempts []json.RawMessage `json:"attempts"`
}

func (h *Handler) pageDeployment(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	id := r.PathValue("id")
	// The log first, then the deploy: every event up to the last line read
	// is in the deploy read after it, and the stream resumes after that
	// line, so no state or step change falls in between.
	var dv deployView
	if r.Header.Get("X-Manent-Fragment") == "" { // the log is followed by the script
		var logs api.LogsResult
		if err := h.call(r, v, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id)+"/logs", nil, &logs); err != nil {
			return err
		}
		dv.Lines, dv.More = logs.Lines, logs.NextAfter > 0
		if n := len(logs.Lines); n > 0 {
			dv.LastSeq = logs.Lines[n-1].Seq
		}
	}
	var d manent.Deployment
	if err := h.call(r, v, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id), nil, &d); err != nil {
		return err
	}
	dv.D = d
	if len(d.Deliveries) > 0 {
		if err := json.Unmarshal(d.Deliveries, &dv.Deliveries); err != nil {
			h.log.Warn("web: a deploy's deliveries", "deployment", d.ID, "error", err)
		}
	}
	for _, a := range d.Approvals {
		if a.Verdict == "approve" {
			dv.Approvals++
			if a.Identity == v.Identity.Subject {
				dv.Approved = true
			}
		}
	}
	dv.Submitter = d.Requester == v.Identity.Subject
	dv.CanApprove = d.State == manent.StateAwaitingApproval && !dv.Submitter && h.can(v, auth.DeploymentApprove, d.Application, d.Environment)
	if dv.CanApprove && d.Decision != nil && len(d.Decision.Approvers) > 0 && !v.Identity.Matches(d.Decision.Approvers) {
		// The engine would refuse (403): no buttons, and the page says why.
		dv.CanApprove, dv.NotApprover = false, true
	}
	if dv.Approved {
		// An identity decides once: a Reject now would be refused (409).
		dv.CanApprove = false
	}
	dv.MayNotApprove = !h.can(v, auth.DeploymentApprove, d.Application, d.Environment)
	dv.Approvers = "anyone who may approve deploys of " + d.Application + " in " + d.Environment + " (deployment.approve), except the submitter"
	if d.Decision != nil && len(d.Decision.Approvers) > 0 && !slices.Contains(d.Decision.Approvers, "*") {
		dv.Approvers = strings.Join(d.Decision.Approvers, ", ")
	}
	dv.MaxComment = api.MaxComment
	if d.State == manent.StatePending {
		for i := range d.Rollout {
			if d.Rollout[i].State == waveAwaitingApproval {
				dv.Wave = &d.Rollout[i]
			}
		}
	}
	if w := dv.Wave; w != nil {
		for _, a := range w.Approvals {
			if a.Verdict == "approve" {
				dv.WaveApprovals++
			}
			if a.Identity == v.Identity.Subject {
				dv.WaveApproved = true // an identity decides once on a wave
			}
		}
		// The engine refuses the submitter, an identity outside the rule's
		// approvers and a second verdict (approveWave): no buttons then,
		// and the page says why.
		dv.WaveNotApprover = d.Decision != nil && len(d.Decision.Approvers) > 0 && !v.Identity.Matches(d.Decision.Approvers)
		dv.CanApproveWave = !dv.Submitter && !dv.MayNotApprove && !dv.WaveApproved && !dv.WaveNotApprover
	}
	dv.CanCancel = !d.State.Final() && h.can(v, auth.DeploymentCancel, d.Application, d.Environment)
	p.Title = fmt.Sprintf("%s %s → %s", d.Application, d.Version, d.Environment)
	p.Data = dv
	if !d.State.Final() || r.URL.Query().Get("follow") != "" {
		p.Stream = h.prefix + "/deployments/" + url.PathEscape(id) + "/events?last_event_id=" + strconv.FormatInt(dv.LastSeq, 10)
		p.Live, p.Log = true, true
	}
	return nil
}

// waveAwaitingApproval is the state of a rollout wave that waits for its
// approval (engine.WaveApproval).
const waveAwaitingApproval = manent.WaveAwaitingApproval

// handleAction serves the approve, reject and cancel buttons: CSRF first,
// then the API decides (RBAC, approvers, state) exactly as for the CLI.
func (h *Handler) handleAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		v, serr := h.signedIn(r)
		if serr != nil && !errors.Is(serr, errNoSession) {
			h.uncheckedSession(w, r, serr)
			return
		}
		if err := r.ParseForm(); err != nil {
			h.renderError(w, r, v, http.StatusBadRequest, "The form could not be read.")
			return
		}
		if v == nil || !equalStrings(v.sess.CSRF, r.PostForm.Get("csrf")) {
			h.renderError(w, r, v, http.StatusForbidden, "This form is missing its CSRF token or its session: reload the page and try again.")
			return
		}
		id := r.PathValue("id")
		var body any
		if action != "cancel" {
			// wave pins the verdict to what the page showed waiting: the
			// wave named, or ("") the deploy's own approval — never to
			// what waits by the time the form is posted.
			body = map[string]string{"comment": r.PostForm.Get("comment"), "plan_digest": r.PostForm.Get("plan_digest"),
				"wave": r.PostForm.Get("wave")}
		}
		if err := h.call(r, v, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/"+action, body, nil); err != nil {
			h.fail(w, r, v, err)
			return
		}
		http.Redirect(w, r, h.prefix+"/deployments/"+url.PathEscape(id), http.StatusSeeOther)
	}
}

func (h *Handler) pageEnvironments(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	var inv api.InventoryResult
	if err := h.call(r, v, http.MethodGet, "/api/v1/inventory", nil, &inv); err != nil {
		return err
	}
	p.Title, p.Data = "Environments", inv
	p.Stream, p.Live = h.prefix+"/events", true
	return nil
}

// historyView is the history of one application/environment.
type historyView struct {
	Application, Environment string
	Items                    []api.HistoryEntry
	Current                  string
	Next                     string
}

func (h *Handler) pageHistory(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	app, env := r.PathValue("application"), r.PathValue("environment")
	// The history route checks the names (a link's "x has been rolled
	// back…" is refused, not shown as the page's heading) and RBAC on them.
	q := url.Values{"limit": {"50"}}
	if c := r.URL.Query().Get("cursor"); c != "" {
		q.Set("cursor", c)
	}
	var res api.HistoryResult
	if err := h.call(r, v, http.MethodGet, "/api/v1/environments/"+url.PathEscape(app)+"/"+url.PathEscape(env)+"/history?"+q.Encode(), nil, &res); err != nil {
		return err
	}
	hv := historyView{Application: res.Application, Environment: res.Environment, Items: res.Items, Next: res.NextCursor}
	if res.Current != nil {
		hv.Current = res.Current.DeploymentID
	}
	p.Title, p.Nav, p.Data = hv.Application+" in "+hv.Environment, "environments", hv
	return nil
}

func (h *Handler) pageClusters(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	if c := strings.TrimSpace(r.URL.Query().Get("cluster")); c != "" {
		http.Redirect(w, r, h.prefix+"/clusters/"+url.PathEscape(c), http.StatusSeeOther)
		return errRedirected
	}
	var res api.ClustersResult
	if err := h.call(r, v, http.MethodGet, "/api/v1/clusters", nil, &res); err != nil {
		return err
	}
	items := make([]clusterRow, 0, len(res.Items))
	for _, c := range res.Items {
		row := clusterRow{ClusterSummary: c}
		if d := h.now().Sub(c.LastReportAt); d > clusterstate.SilentAfter {
			row.Silent = roundDuration(d)
		}
		items = append(items, row)
	}
	p.Title, p.Nav, p.Data = "Clusters", "clusters", items
	return nil
}

// clusterRow is a cluster in the list.
type clusterRow struct {
	api.ClusterSummary
	// Silent says how long no report came, when that is long.
	Silent string
}

// errRedirected tells page that the handler answered already.
var errRedirected = errors.New("redirected")

// clusterView is a cluster as last reported.
type clusterView struct {
	S clusterstate.Status
	// Silent says how long no report came, when that is long.
	Silent  string
	Failing []clusterstate.Pod
}

func (h *Handler) pageCluster(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	c := r.PathValue("cluster")
	var st clusterstate.Status
	if err := h.call(r, v, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(c)+"/status", nil, &st); err != nil {
		return err
	}
	cv := clusterView{S: st}
	if st.LastReportAt.IsZero() {
		cv.Silent = "never"
	} else if d := h.now().Sub(st.LastReportAt); d > clusterstate.SilentAfter {
		cv.Silent = roundDuration(d)
	}
	for _, pod := range st.Pods {
		if len(pod.Failures()) > 0 {
			cv.Failing = append(cv.Failing, pod)
		}
	}
	p.Title, p.Nav, p.Data = "Cluster "+c, "clusters", cv
	p.Stream, p.Live = h.prefix+"/events", true
	return nil
}

func (h *Handler) pageSchedules(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	var res api.SchedulesResult
	if err := h.call(r, v, http.MethodGet, "/api/v1/schedules", nil, &res); err != nil {
		return err
	}
	p.Title, p.Data = "Schedules", res
	return nil
}

// auditView is one page of the audit log.
type auditView struct {
	Items  []api.AuditEntry
	Action string
	Next   string
}

func (h *Handler) pageAudit(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	q := url.Values{"limit": {"100"}}
	action := r.URL.Query().Get("action")
	if action != "" {
		q.Set("action", action)
	}
	if b := r.URL.Query().Get("before"); b != "" {
		q.Set("before", b)
	}
	var res api.AuditResult
	if err := h.call(r, v, http.MethodGet, "/api/v1/audit?"+q.Encode(), nil, &res); err != nil {
		return err
	}
	av := auditView{Items: res.Items, Action: action}
	if res.NextBefore > 0 {
		nq := url.Values{"before": {strconv.FormatInt(res.NextBefore, 10)}}
		if action != "" {
			nq.Set("action", action)
		}
		av.Next = h.prefix + "/audit?" + nq.Encode()
	}
	p.Title, p.Data = "Audit log", av
	return nil
}

func (h *Handler) pageLogout(w http.ResponseWriter, r *http.Request, v *viewer, p *pageData) error {
	p.Title = "Sign out"
	return nil
}
