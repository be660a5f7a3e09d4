package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// Registry keeps the registered hooks: it validates and stores changes, and holds an in-memory
// snapshot that every dispatch matches against, so the hot path never queries the database.
// Changes made through another replica on the same database reach the snapshot within one
// refresh interval.
type Registry struct {
	db   *storage.DB
	log  *slog.Logger
	snap atomic.Pointer[snapshot]
	// reloading serialises Reload: a refresh that read the hooks before a write and stored its
	// snapshot after the write's own reload would drop the written hook (a new deny hook not
	// enforced) until the next refresh.
	reloading sync.Mutex
	refresh   time.Duration
	guard     *netguard.Guard // nil: receivers are not checked at registration
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithGuard makes registration refuse a receiver that the SSRF guard g, the one the dispatcher
// dials through, would refuse at every call. Without it every well-formed URL is accepted.
func WithGuard(g *netguard.Guard) RegistryOption { return func(r *Registry) { r.guard = g } }

type snapshot struct {
	version string
	byType  map[HookType][]*boundHook // enabled hooks, in chain order (priority, then id)
	all     map[int64]*boundHook      // every hook, enabled or not
	urls    map[string]bool           // the receiver URL of every webhook hook
	// receivers are the keys of urls, sorted: the rows of GET /api/breakers.
	receivers []string
}

// hook is hook id as s bound it (nil when s is nil: the first load, or when it had none).
func (s *snapshot) hook(id int64) *boundHook {
	if s == nil {
		return nil
	}
	return s.all[id]
}

// boundHook is a hook with its toolNameMatch compiled and its decider ready: for a webhook, what
// its requests need prepared; for a policy, the compiled rules.
type boundHook struct {
	Hook
	match   hookdtype.NameMatch
	wire    *hookWire
	decider decider
}

// NewRegistry loads the hooks of db.
func NewRegistry(ctx context.Context, db *storage.DB, log *slog.Logger, opts ...RegistryOption) (*Registry, error) {
	r := &Registry{db: db, log: log, refresh: 2 * time.Second}
	for _, o := range opts {
		o(r)
	}
	if err := r.Reload(ctx); err != nil {
		return nil, err
	}
	r.warnUnreachable()
	return r, nil
}

// warnUnreachable names, at start, each stored hook whose receiver is an address the guard now
// refuses (registered under a laxer webhooks setting): every call to it falls to its failureMode.
// Only literal addresses are checked, so a start never waits on DNS.
func (r *Registry) warnUnreachable() {
	if r.guard == nil {
		return
	}
	for _, h := range r.snap.Load().all {
		if h.DispatchType != DispatchWebhook {
			continue
		}
		u, err := url.Parse(h.DispatchConfig.URL)
		if err != nil {
			continue
		}
		ip, err := netip.ParseAddr(u.Hostname())
		var blocked *netguard.BlockedError
		if err == nil && errors.As(r.guard.Check(ip), &blocked) {
			r.log.Warn("hook receiver can never be reached; every call falls to its failureMode", "hookId", h.ID,
				"hookName", h.HookName, "failureMode", h.DispatchConfig.FailureMode, "reason", unreachable(blocked))
		}
	}
}

// Match returns the enabled hooks of type t that apply to agentID (nil: hooks for every agent
// only) and, for tool types, to toolName — in chain order. The slice may be the snapshot's own:
// callers must not modify it.
func (r *Registry) Match(t HookType, agentID *int64, toolName string) []*boundHook {
	hooks := r.snap.Load().byType[t]
	toolScoped := t.ToolScoped()
	applies := func(h *boundHook) bool {
		return forAgent(h.AgentID, agentID) && (!toolScoped || h.match.Match(toolName))
	}
	for i, h := range hooks {
		if applies(h) {
			continue
		}
		// The first hook that does not apply: copy the ones before it and filter the rest.
		out := make([]*boundHook, i, len(hooks)-1)
		copy(out, hooks[:i])
		for _, h := range hooks[i+1:] {
			if applies(h) {
				out = append(out, h)
			}
		}
		return out
	}
	return hooks[:len(hooks):len(hooks)] // every hook applies: no copy
}

// forAgent reports whether a hook registered for scope (nil: every agent) applies to an event of
// agentID (nil: of no agent in particular).
func forAgent(scope, agentID *int64) bool {
	return scope == nil || (agentID != nil && *scope == *agentID)
}

// WouldAsk returns nil if a dispatch of ev would ask h (enabled or not: its agent and, on the
// tool points, its toolNameMatch), and otherwise a validation error naming the field of ev that
// rules it out.
func (h *Hook) WouldAsk(ev Event) error {
	who := fmt.Sprintf("hook %d", h.ID)
	if h.ID == 0 { // not stored: a hook file's
		who = fmt.Sprintf("hook %q", h.HookName)
	}
	if !forAgent(h.AgentID, ev.AgentID) {
		return invalid("event.agentId", "%s applies to agent %d only: a dispatch would not ask it", who, *h.AgentID)
	}
	if !h.HookType.ToolScoped() {
		return nil
	}
	m, err := hookdtype.ParseNameMatch(h.ToolNameMatch)
	if err != nil {
		return err
	}
	if tool := ev.toolName(); !m.Match(tool) {
		return invalid("event.context.toolName", "%s does not apply to tool %q (toolNameMatch %q): a dispatch would not ask it",
			who, tool, h.ToolNameMatch)
	}
	return nil
}

// Reload rebuilds the snapshot from the database.
func (r *Registry) Reload(ctx context.Context) error {
	r.reloading.Lock()
	defer r.reloading.Unlock()
	version, err := r.db.HooksVersion(ctx)
	if err != nil {
		return err
	}
	rows, err := r.db.ListHooks(ctx, storage.HookFilter{})
	if err != nil {
		return err
	}
	s := &snapshot{version: version, byType: map[HookType][]*boundHook{}, all: map[int64]*boundHook{}, urls: map[string]bool{}}
	old := r.snap.Load()
	for _, row := range rows {
		h, err := fromRow(row)
		if err != nil {
			return err
		}
		var m hookdtype.NameMatch
		if prev := old.hook(h.ID); prev != nil && prev.ToolNameMatch == h.ToolNameMatch {
			m = prev.match // compiled once, not again at every write of any hook
		} else if m, err = hookdtype.ParseNameMatch(h.ToolNameMatch); err != nil {
			// validated on the way in; a bad row is skipped, not fatal
			r.log.Error("hook skipped: bad toolNameMatch", "hookId", h.ID, "err", err)
			continue
		}
		if h.SecretUnreadable {
			r.log.Error("hook secret unreadable: its interceptive calls resolve by failureMode and its events wait"+
				" until a PUT sets the secret again", "hookId", h.ID, "hookName", h.HookName)
		}
		b := &boundHook{Hook: h, match: m}
		b.decider = reuseDecider(old.hook(h.ID), &h)
		if b.decider == nil {
			b.decider = newDecider(&h, r.log)
		}
		if _, ok := b.decider.(webhookDecider); ok {
			b.wire = newHookWire(&h)
		}
		s.all[h.ID] = b
		if h.DispatchType == DispatchWebhook && h.DispatchConfig.URL != "" { // a policy hook has none
			s.urls[h.DispatchConfig.URL] = true
		}
		if *h.Enabled {
			s.byType[h.HookType] = append(s.byType[h.HookType], b)
		}
	}
	s.receivers = slices.Sorted(maps.Keys(s.urls))
	for _, hooks := range s.byType {
		slices.SortFunc(hooks, func(a, b *boundHook) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
		})
	}
	r.snap.Store(s)
	return nil
}

// Run refreshes the snapshot when another process changed the hooks, until ctx ends.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTicker(r.refresh)
	defer t.Stop()
	// On PostgreSQL another replica's hook write is announced at its commit: look then. The poll
	// stays for when the listener is down (what it missed meanwhile is found at the next tick).
	changed := make(chan struct{}, 1)
	wake := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if r.db.Dialect() == storage.Postgres {
		listening := make(chan struct{})
		defer func() { <-listening }() // Listen returns once ctx ends
		go func() {
			defer close(listening)
			_ = r.db.Listen(ctx, []string{storage.ChannelHooks}, storage.Listener{
				OnConnect: wake,
				OnNotify:  func(string, string) { wake() },
				OnError: func(err error) {
					r.log.Warn("hook change notifications: listener lost; other replicas' changes are seen at the next poll", "err", err)
				},
			})
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
		v, err := r.db.HooksVersion(ctx)
		if err != nil || v == r.snap.Load().version {
			continue
		}
		if err := r.Reload(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("hook registry refresh failed", "err", err)
		}
	}
}

// Create validates and stores a new hook.
func (r *Registry) Create(ctx context.Context, h Hook) (Hook, error) {
	if err := r.prepareCreate(ctx, &h); err != nil {
		return Hook{}, err
	}
	row, err := toRow(&h)
	if err != nil {
		return Hook{}, err
	}
	if err := r.db.CreateHook(ctx, &row); err != nil {
		return Hook{}, err
	}
	return r.afterWrite(ctx, row, h)
}

// Replace validates and stores h as hook id, keeping secrets as the update rules say.
func (r *Registry) Replace(ctx context.Context, id int64, h Hook) (Hook, error) {
	stored, err := r.prepareReplace(ctx, id, &h)
	if err != nil {
		return Hook{}, err
	}
	row, err := toRow(&h)
	if err != nil {
		return Hook{}, err
	}
	row.CreatedAt = *stored.CreatedAt
	if err := r.db.UpdateHook(ctx, &row); err != nil {
		return Hook{}, err
	}
	return r.afterWrite(ctx, row, h)
}

// Check validates h exactly as Create (id 0) or Replace of hook id would, receivers and stored
// secrets included, and stores nothing; it returns the hook as the write would store it.
func (r *Registry) Check(ctx context.Context, id int64, h Hook) (Hook, error) {
	var err error
	if id == 0 {
		err = r.prepareCreate(ctx, &h)
	} else {
		_, err = r.prepareReplace(ctx, id, &h)
	}
	if err != nil {
		return Hook{}, err
	}
	return h, nil
}

// prepareCreate validates a new hook and brings it to the form it is stored in.
func (r *Registry) prepareCreate(ctx context.Context, h *Hook) error {
	if err := h.Normalize(); err != nil {
		return err
	}
	if err := r.checkReceivers(ctx, h); err != nil {
		return err
	}
	if s := h.DispatchConfig.SigningSecret; s != nil && *s == "" {
		h.DispatchConfig.SigningSecret = nil
	}
	return nil
}

// prepareReplace validates h as the replacement of hook id, with the stored secrets merged as the
// update rules say, and returns the stored hook.
func (r *Registry) prepareReplace(ctx context.Context, id int64, h *Hook) (Hook, error) {
	stored, err := r.Get(ctx, id)
	if err != nil {
		return Hook{}, err
	}
	if err := hookdtype.SameCreatedAt(h.CreatedAt, stored.CreatedAt); err != nil {
		return Hook{}, err
	}
	if stored.SecretUnreadable && h.DispatchType != DispatchPolicy &&
		(h.DispatchConfig.SigningSecret == nil || *h.DispatchConfig.SigningSecret == Masked) {
		return Hook{}, hookdtype.Invalid("dispatchConfig.signingSecret",
			"the stored secret does not open with the configured master keys; send it again (\"\" for none)")
	}
	if err := h.MergeSecrets(&stored); err != nil {
		return Hook{}, err
	}
	if err := h.Normalize(); err != nil {
		return Hook{}, err
	}
	if err := r.checkReceivers(ctx, h); err != nil {
		return Hook{}, err
	}
	h.ID = id
	return stored, nil
}

// checkReceivers refuses a hook whose receiver, or token endpoint, can never be reached: a
// literal address the guard refuses, or a name that now resolves to one (the guard refuses a
// name when any of its addresses is blocked). A name that does not resolve now is accepted with a
// note on h (and in the log), since it may by the first call; the guard checks again at every dial
// either way.
func (r *Registry) checkReceivers(ctx context.Context, h *Hook) error {
	if r.guard == nil || h.DispatchType != DispatchWebhook {
		return nil
	}
	targets := [][2]string{{"dispatchConfig.url", h.DispatchConfig.URL}}
	if a := h.DispatchConfig.Auth; a != nil && a.TokenFetchConfig != nil {
		targets = append(targets, [2]string{"dispatchConfig.auth.tokenFetchConfig.url", a.TokenFetchConfig.URL})
	}
	for _, t := range targets {
		u, err := url.Parse(t[1])
		if err != nil {
			return invalid(t[0], "is not a URL: %v", err) // Normalize has parsed it already
		}
		lookup, cancel := context.WithTimeout(ctx, 3*time.Second)
		err = r.guard.CheckHost(lookup, u.Hostname())
		cancel()
		var blocked *netguard.BlockedError
		switch {
		case errors.As(err, &blocked):
			return invalid(t[0], "%s", unreachable(blocked))
		case err != nil:
			r.log.WarnContext(ctx, "receiver host does not resolve now; the SSRF guard checks it at every call",
				"hookName", h.HookName, "field", t[0], "host", u.Hostname(), "err", err)
			then := "its deliveries fail before they are sent and are retried until they end dead"
			if h.HookType.Interceptive() {
				then = "every call fails before it is sent and the hook falls to failureMode " + h.DispatchConfig.FailureMode
			}
			h.receiverNotes = append(h.receiverNotes, fmt.Sprintf("%s: %s does not resolve now (%v); until it does, %s "+
				"(the SSRF guard looks the name up again at every call)", t[0], u.Hostname(), err, then))
		}
	}
	return nil
}

// unreachable says why the guard refuses an address and which setting would allow it.
func unreachable(b *netguard.BlockedError) string {
	what := b.Addr.String()
	if b.Host != "" {
		what = b.Host + " resolves to " + what
	}
	if b.Embedded.IsValid() {
		what += " (the " + b.Form + " form of " + b.Embedded.String() + ")"
	}
	msg := what + " is " + b.Range + ", which the SSRF guard refuses at every call; "
	switch b.AllowedBy {
	case netguard.ByPrivateOrCIDRs:
		return msg + "set webhooks.allowPrivateNetworks: true, or list the address in webhooks.allowCIDRs, to allow it"
	case netguard.ByCIDRsOnly:
		return msg + "only an entry in webhooks.allowCIDRs allows it (webhooks.allowPrivateNetworks does not)"
	}
	return msg + "no setting allows it"
}

func (r *Registry) afterWrite(ctx context.Context, row storage.Hook, written Hook) (Hook, error) {
	if err := r.Reload(ctx); err != nil {
		r.log.WarnContext(ctx, "hook registry reload failed", "err", err)
	}
	h, err := fromRow(row)
	h.receiverNotes = written.receiverNotes
	return h, err
}

// Get reads one hook; storage.ErrNotFound if there is none.
func (r *Registry) Get(ctx context.Context, id int64) (Hook, error) {
	row, err := r.db.GetHook(ctx, id)
	if err != nil {
		return Hook{}, err
	}
	return fromRow(row)
}

// List returns the hooks of f, by id.
func (r *Registry) List(ctx context.Context, f storage.HookFilter) ([]Hook, error) {
	rows, err := r.db.ListHooks(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Hook, 0, len(rows))
	for _, row := range rows {
		h, err := fromRow(row)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// Delete removes a hook.
func (r *Registry) Delete(ctx context.Context, id int64) error {
	if err := r.db.DeleteHook(ctx, id); err != nil {
		return err
	}
	if err := r.Reload(ctx); err != nil {
		r.log.WarnContext(ctx, "hook registry reload failed", "err", err)
	}
	return nil
}

func toRow(h *Hook) (storage.Hook, error) {
	doc, secrets, err := h.split()
	if err != nil {
		return storage.Hook{}, fmt.Errorf("encode hook: %w", err)
	}
	return storage.Hook{ID: h.ID, HookType: string(h.HookType), AgentID: h.AgentID, Enabled: *h.Enabled,
		Priority: h.Priority, Doc: doc, Secrets: secrets}, nil
}

func fromRow(row storage.Hook) (Hook, error) {
	h, err := join(row.ID, row.Doc, row.Secrets, row.CreatedAt, row.UpdatedAt)
	h.SecretUnreadable = row.SecretsUnreadable
	return h, err
}

// SecretsUnreadable counts the hooks whose stored secrets open with no configured master key.
func (r *Registry) SecretsUnreadable() int {
	n := 0
	for _, h := range r.snap.Load().all {
		if h.SecretUnreadable {
			n++
		}
	}
	return n
}

// ErrSecretUnreadable is the failure of a call a hook cannot make: its stored secrets open with
// no configured master key, and it never calls its receiver without them.
var ErrSecretUnreadable = errors.New("the hook's stored secrets do not open with any configured master key")

// usesURL reports whether a registered hook, enabled or not, sends to url.
func (r *Registry) usesURL(url string) bool { return r.snap.Load().urls[url] }

// receivers returns the distinct receiver URLs of the registered webhook hooks, enabled or not,
// sorted, with the test usesURL answers for the same snapshot. The slice is the snapshot's own:
// callers must not modify it.
func (r *Registry) receivers() (urls []string, uses func(url string) bool) {
	s := r.snap.Load()
	return s.receivers, func(url string) bool { return s.urls[url] }
}

// byID returns a registered hook whether enabled or not; nil when it was deleted. The queued
// deliveries of a disabled hook wait, paused, until it is enabled again.
func (r *Registry) byID(id int64) *boundHook {
	return r.snap.Load().all[id]
}
