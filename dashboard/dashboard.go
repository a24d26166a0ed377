// Package dashboard serves a store's state over HTTP, for people and for
// scripts: an http.Handler a service mounts where it likes, as it would
// net/http/pprof. It has pages (html/template, one embedded style sheet,
// no JavaScript) and a JSON twin of every page under api/:
//
//	/                 the store: positions, rates, flush latency, disk
//	/topics           topics with message counts and put rates   (?page=)
//	/topic?name=      a topic's queues with offsets and rates    (?page=)
//	/groups           consumer groups with lag and members       (?page=)
//	/group?name=      a group's lag per queue, members, DLQ size (?page=)
//	/dlq?group=       a group's dead letters, with re-drive      (?from=)
//	/message?id=      a message by ID
//	/search?topic=&key=  messages by key
//	/trace?id=        a message's life (mqlite.Options.MessageTrace)
//	POST /redrive     re-drive a dead letter (Options.AllowWrites)
//
// Every list is paginated (Options.PageSize), so a store with tens of
// thousands of queues answers with one page. User data (topics, keys,
// tags, properties, bodies) is escaped by html/template, and by
// encoding/json in the API. The handler is read-only unless
// Options.AllowWrites; a write is a POST that must carry the handler's
// token and pass http.CrossOriginProtection.
//
// Mount it under a prefix with the same Options.Prefix:
//
//	mux.Handle("/mqlite/", dashboard.New(store, &dashboard.Options{Prefix: "/mqlite"}))
package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
)

// DefaultPageSize is the rows per page when Options.PageSize is 0.
const DefaultPageSize = 100

// MaxPageSize bounds Options.PageSize.
const MaxPageSize = 1000

// Options configure a dashboard. A nil *Options means the defaults.
type Options struct {
	// Prefix is the path the handler is mounted at ("" or "/mqlite"); it
	// is stripped from requests and prepended to links.
	Prefix string
	// PageSize is the rows of one page of any list (default 100, at most
	// MaxPageSize).
	PageSize int
	// AllowWrites enables the re-drive button and POST /redrive. Off by
	// default: the dashboard is read-only.
	AllowWrites bool
	// Title heads every page (default "mqlite").
	Title string
	// Clock times the rates (default clock.Real).
	Clock clock.Clock
}

//go:embed templates/*.html static/*.css
var files embed.FS

// Handler is the dashboard's http.Handler.
type Handler struct {
	s     *mqlite.Store
	o     Options
	pages map[string]*template.Template
	token string
	rates *rates
	mux   *http.ServeMux
	cop   *http.CrossOriginProtection
}

// New returns a dashboard over s. Bad options are reported with an error
// matching mqlite.ErrInvalidArgument.
func New(s *mqlite.Store, opts *Options) (*Handler, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if s == nil {
		return nil, fmt.Errorf("mqlite/dashboard: nil store: %w", mqlite.ErrInvalidArgument)
	}
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.PageSize < 1 || o.PageSize > MaxPageSize {
		return nil, fmt.Errorf("mqlite/dashboard: PageSize %d outside 1..%d: %w", o.PageSize, MaxPageSize, mqlite.ErrInvalidArgument)
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	if o.Prefix != "" && !strings.HasPrefix(o.Prefix, "/") {
		return nil, fmt.Errorf("mqlite/dashboard: Prefix %q does not start with /: %w", o.Prefix, mqlite.ErrInvalidArgument)
	}
	if o.Title == "" {
		o.Title = "mqlite"
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("mqlite/dashboard: token: %w", err)
	}
	h := &Handler{s: s, o: o, token: hex.EncodeToString(tok[:]), rates: newRates(o.Clock), cop: http.NewCrossOriginProtection()}
	if err := h.parse(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

func (h *Handler) parse() error {
	funcs := template.FuncMap{
		"link": h.link,
		"pager": func(p Pager, url string) map[string]any {
			return map[string]any{"P": p, "URL": h.link(url), "Prev": p.Page - 1, "Next": p.Page + 1}
		},
		"rate": func(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) },
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05.000")
		},
	}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return err
	}
	h.pages = map[string]*template.Template{}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("mqlite/dashboard: template %s: %w", n, err)
		}
		h.pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return nil
}

// link is the path of a dashboard page under the prefix.
func (h *Handler) link(p string) string { return h.o.Prefix + p }

// view builds a page's data from a request.
type view func(r *http.Request) (any, error)

func (h *Handler) routes() {
	h.mux = http.NewServeMux()
	pages := map[string]view{
		"overview": h.overview, "topics": h.topics, "topic": h.topic, "groups": h.groups,
		"group": h.group, "dlq": h.dlq, "message": h.message, "search": h.search, "trace": h.trace,
	}
	for name, v := range pages {
		path := "/" + name
		if name == "overview" {
			path = "/{$}"
		}
		h.mux.HandleFunc("GET "+path, h.page(name, v))
		h.mux.HandleFunc("GET /api/"+name, h.api(v))
	}
	h.mux.HandleFunc("GET /static/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		b, _ := files.ReadFile("static/style.css")
		w.Write(b)
	})
	h.mux.Handle("POST /redrive", h.cop.Handler(http.HandlerFunc(h.redrive)))
	h.mux.Handle("POST /api/redrive", h.cop.Handler(http.HandlerFunc(h.redrive)))
}

// ServeHTTP serves the dashboard.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.o.Prefix != "" {
		p := strings.TrimPrefix(r.URL.Path, h.o.Prefix)
		if len(p) == len(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = p, ""
		if u.Path == "" {
			u.Path = "/"
		}
		r2.URL = &u
		r = r2
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'none'")
	h.mux.ServeHTTP(w, r)
}

// page is the data every template gets.
type page struct {
	Title  string
	Page   string
	Writes bool
	Token  string
	Data   any
	Err    string
}

func (h *Handler) page(name string, v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := v(r)
		p := page{Title: h.o.Title, Page: name, Writes: h.o.AllowWrites, Data: data}
		if h.o.AllowWrites {
			p.Token = h.token
		}
		status := http.StatusOK
		if err != nil {
			status, p.Err = statusOf(err), err.Error()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		if err := h.pages[name].Execute(w, p); err != nil {
			fmt.Fprintf(w, "<p>template error: %s</p>", template.HTMLEscapeString(err.Error()))
		}
	}
}

func (h *Handler) api(v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := v(r)
		if err != nil {
			writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, data)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w) // escapes <, > and & in strings
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// statusOf maps an error to an HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errForbidden):
		return http.StatusForbidden
	case errors.Is(err, mqlite.ErrTopicNotFound), errors.Is(err, mqlite.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, mqlite.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, mqlite.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

var errForbidden = errors.New("mqlite/dashboard: writes are disabled (Options.AllowWrites) or the token is wrong")

// redrive re-drives one dead letter: POST group, id and token.
func (h *Handler) redrive(w http.ResponseWriter, r *http.Request) {
	api := strings.HasPrefix(r.URL.Path, "/api/")
	fail := func(err error) {
		if api {
			writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
			return
		}
		http.Error(w, err.Error(), statusOf(err))
	}
	if !h.o.AllowWrites {
		fail(errForbidden)
		return
	}
	tok := r.PostFormValue("token")
	if tok == "" {
		tok = r.Header.Get("X-Mqlite-Token")
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(h.token)) != 1 {
		fail(errForbidden)
		return
	}
	group, id := r.PostFormValue("group"), r.PostFormValue("id")
	res, err := h.s.Redrive(r.Context(), group, id)
	if err != nil && !errors.Is(err, mqlite.ErrFlushTimeout) {
		fail(err)
		return
	}
	if api {
		writeJSON(w, http.StatusOK, map[string]any{"topic": res.Topic, "queue": res.QueueID, "offset": res.QueueOffset, "id": res.MsgID()})
		return
	}
	http.Redirect(w, r, h.link("/message?id="+res.MsgID()), http.StatusSeeOther)
}

// Token is the value a write must carry (form field "token" or header
// X-Mqlite-Token); "" while writes are disabled. Pages that offer a write
// embed it.
func (h *Handler) Token() string {
	if !h.o.AllowWrites {
		return ""
	}
	return h.token
}
