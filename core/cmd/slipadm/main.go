// Command slipadm operates the platform through core's admin API: services
// and their plans and states, branch keys, B2B clients, admin tokens, the
// audit log and the export.
//
//	slipadm <noun> <verb> [flags]      e.g. slipadm services get svc-demo -o json
//
// The API is at SLIP_ADMIN_URL (scheme, host and port; default
// http://127.0.0.1:8085) and slipadm authenticates with SLIP_ADMIN_TOKEN;
// --url and --token override them. -o table|json (anywhere on the line)
// picks the output: aligned columns for a list and "key: value" lines for
// one record, or the answer's data as indented JSON. Keys, secrets and tokens
// are in an answer only once, when they are made; slipadm says so on stderr.
// Destructive commands (deleting, banning, ending an overlap, forcing a
// rotation) refuse to run without --yes.
//
// Exit status: 0 done, 1 the API refused (stderr: "error CODE: message") or
// could not be reached, 2 a usage error or a refusal to run without --yes.
//
// Each command is one row of the commands table (commands.go): its method,
// its path, and its flags with where each one's value goes.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// version is set by the Makefile (-X main.version).
var version = "dev"

const defaultURL = "http://127.0.0.1:8085"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run runs one command line and returns the exit status.
func run(args []string, env func(string) string, stdout, stderr io.Writer) int {
	g, args, err := globals(args)
	if err != nil {
		fmt.Fprintf(stderr, "slipadm: %v\n\n", err)
		usage(stderr)
		return 2
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "slipadm", version)
		return 0
	}
	c, rest := find(args)
	if c == nil {
		fmt.Fprintf(stderr, "slipadm: unknown command %q\n\n", strings.Join(args[:min(2, len(args))], " "))
		usage(stderr)
		return 2
	}
	if g.out != "table" && g.out != "json" {
		fmt.Fprintf(stderr, "slipadm %s: -o %q: want table or json\n\n", c.name(), g.out)
		c.usage(stderr)
		return 2
	}
	k, err := c.parse(rest)
	if errors.Is(err, flag.ErrHelp) {
		c.usage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "slipadm %s: %v\n\n", c.name(), err)
		c.usage(stderr)
		return 2
	}
	if k.danger && !k.yes {
		fmt.Fprintf(stderr, "slipadm: refusing %s: it is destructive; add --yes to go ahead\n", strings.Join(append([]string{c.name()}, k.risky...), " "))
		return 2
	}

	cl := &admin{base: first(g.url, env("SLIP_ADMIN_URL"), defaultURL), token: first(g.token, env("SLIP_ADMIN_TOKEN"))}
	if u, err := url.Parse(cl.base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		fmt.Fprintf(stderr, "slipadm: admin URL %q: want scheme, host and port, e.g. %s\n", cl.base, defaultURL)
		return 2
	}
	cl.base = strings.TrimSuffix(cl.base, "/")
	if cl.token == "" {
		fmt.Fprintln(stderr, "slipadm: no admin token: set SLIP_ADMIN_TOKEN or --token")
		return 2
	}

	var data json.RawMessage
	var next string
	if c.pages {
		data, next, err = cl.pages(k)
	} else {
		data, err = cl.do(k.method, k.path, k.body)
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		fmt.Fprintln(stderr, printable(cl.redact(ae.Error())))
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "slipadm:", printable(cl.redact(err.Error())))
		return 1
	}
	if err := show(stdout, g.out, c, data); err != nil {
		fmt.Fprintln(stderr, "slipadm: printing the answer:", printable(err.Error()))
		return 1
	}
	if next != "" && g.out == "table" {
		fmt.Fprintf(stderr, "more: add --cursor %s for the next page, or --all for every page\n", printable(next))
	}
	if c.once != "" {
		fmt.Fprintln(stderr, "note:", c.once)
	}
	return 0
}

// settings are the flags that may stand anywhere on the line.
type settings struct{ out, url, token string }

// globals takes -o, --url and --token out of args wherever they are (as
// -o json, -o=json, --output json...), so that they may follow the verb or
// precede the noun alike; it returns the rest in order.
func globals(args []string) (settings, []string, error) {
	g := settings{out: "table"}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		var dst *string
		switch {
		case !strings.HasPrefix(a, "-"):
		case name == "o" || name == "output":
			dst = &g.out
		case name == "url":
			dst = &g.url
		case name == "token":
			dst = &g.token
		}
		if dst == nil {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 == len(args) {
				return g, nil, fmt.Errorf("%s needs a value", a)
			}
			i++
			val = args[i]
		}
		*dst = val
	}
	return g, rest, nil
}

// find returns the command args name and the arguments after its name.
func find(args []string) (*command, []string) {
	for _, c := range commands {
		switch {
		case c.noun != args[0]:
		case c.verb == "":
			return c, args[1:]
		case len(args) > 1 && c.verb == args[1]:
			return c, args[2:]
		}
	}
	return nil, nil
}

func (c *command) name() string { return strings.TrimSpace(c.noun + " " + c.verb) }

// call is a parsed command line: the request to send.
type call struct {
	method string
	path   string   // under /admin/v1, with its query
	body   any      // nil: none
	danger bool     // destructive: it needs --yes
	risky  []string // the flags that make it destructive
	yes    bool     // --yes
	all    bool     // --all: follow the cursor to the last page
}

// flags returns the command's flag set. Every value flag is a string flag:
// parse converts it, and tells a flag not given from an empty one.
func (c *command) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("slipadm "+c.name(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range c.fields {
		help := f.help
		if len(f.choices) > 0 {
			help += " (" + strings.Join(f.choices, " or ") + ")"
		}
		if f.need {
			help += " (required)"
		}
		if f.kind == boolean {
			fs.Bool(f.flag, false, help)
		} else {
			fs.String(f.flag, f.def, help)
		}
	}
	if c.danger || slices.ContainsFunc(c.fields, func(f field) bool { return f.yes != "" }) {
		fs.Bool("yes", false, "go ahead with a destructive command")
	}
	if c.pages {
		fs.Bool("all", false, "follow nextCursor to the last page")
	}
	return fs
}

// parse reads the command's flags and arguments (which fill the path's
// placeholders not given as flags, in order) into the request. It reports
// every problem at once.
func (c *command) parse(args []string) (*call, error) {
	fs := c.flags()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, f := range c.fields {
		if len(pos) > 0 && strings.HasPrefix(f.to, "{") && !given[f.flag] {
			fs.Set(f.flag, pos[0])
			given[f.flag], pos = true, pos[1:]
		}
	}
	value := func(name string) string { return fs.Lookup(name).Value.String() }

	var problems []string
	for _, p := range pos {
		problems = append(problems, fmt.Sprintf("unexpected argument %q", p))
	}
	k := &call{method: c.method, path: c.path, danger: c.danger, yes: given["yes"] && value("yes") == "true", all: given["all"] && value("all") == "true"}
	query := url.Values{}
	var body map[string]any
	for _, f := range c.fields {
		if f.to != "" && !strings.ContainsAny(f.to[:1], "{?") {
			body = map[string]any{} // the command has a JSON body, {} if no flag fills it
		}
	}
	for _, f := range c.fields {
		if !given[f.flag] && f.def == "" {
			if f.need {
				problems = append(problems, "--"+f.flag+" is required")
			}
			continue
		}
		s := value(f.flag)
		v, err := f.value(s)
		switch {
		case err != nil:
			problems = append(problems, err.Error())
			continue
		case len(f.choices) > 0 && !slices.Contains(f.choices, s):
			problems = append(problems, fmt.Sprintf("--%s %q: want %s", f.flag, s, strings.Join(f.choices, " or ")))
			continue
		case f.yes != "" && s == f.yes:
			k.danger, k.risky = true, append(k.risky, "--"+f.flag+"="+s)
		}
		switch {
		case strings.HasPrefix(f.to, "{"):
			if s == "" {
				problems = append(problems, "--"+f.flag+" must not be empty")
			}
			if f.kind != subpath {
				s = url.PathEscape(s)
			}
			k.path = strings.Replace(k.path, f.to, s, 1)
		case strings.HasPrefix(f.to, "?"):
			query.Set(f.to[1:], s)
		case f.to == "":
			k.body = v
		default:
			put(body, f.to, v)
		}
	}
	if c.method == "PATCH" && len(body) == 0 && k.body == nil {
		problems = append(problems, "nothing to change: give at least one field")
	}
	if body != nil {
		k.body = body
	}
	if len(query) > 0 {
		k.path += "?" + query.Encode()
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return k, nil
}

// value converts a flag's text to the value sent.
func (f field) value(s string) (any, error) {
	switch f.kind {
	case number:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: want a whole number", f.flag, s)
		}
		return n, nil
	case boolean:
		return s == "true", nil
	case list:
		items := []string{}
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		return items, nil
	case nullable:
		if s == "" {
			return nil, nil
		}
	case rawBody:
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("--%s: not JSON", f.flag)
		}
		return json.RawMessage(s), nil
	case subpath:
		if !strings.HasPrefix(s, "/") {
			return nil, fmt.Errorf("--%s %q: want a path starting with /", f.flag, s)
		}
	}
	return s, nil
}

// put sets body's member at the dotted path to v, making the objects on the
// way.
func put(body map[string]any, path string, v any) {
	for {
		k, rest, nested := strings.Cut(path, ".")
		if !nested {
			body[k] = v
			return
		}
		m, _ := body[k].(map[string]any)
		if m == nil {
			m = map[string]any{}
			body[k] = m
		}
		body, path = m, rest
	}
}

// admin sends requests to the admin API.
type admin struct {
	base  string // scheme, host and port
	token string
}

var httpClient = &http.Client{Timeout: time.Minute}

// apiError is the API's refusal: the v2 envelope's error, or the status of
// an answer without one.
type apiError struct{ code, message string }

func (e *apiError) Error() string { return "error " + e.code + ": " + e.message }

// do sends one request and returns the data of the answer's envelope, or
// the error the answer carries.
func (cl *admin) do(method, path string, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, cl.base+"/admin/v1"+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "slipadm/"+version)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	var env struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
		Error   *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	bad := json.Unmarshal(raw, &env) != nil
	ok := res.StatusCode >= 200 && res.StatusCode < 300
	switch {
	case !bad && env.Error != nil && (!ok || !env.Success):
		return nil, &apiError{env.Error.Code, env.Error.Message}
	case !ok:
		msg := strings.Join(strings.Fields(string(raw)), " ")
		if len(msg) > 200 || msg == "" {
			msg = res.Status
		}
		return nil, &apiError{"HTTP_" + strconv.Itoa(res.StatusCode), msg}
	case bad || !env.Success:
		return nil, fmt.Errorf("%s answered %s without the v2 envelope: %.200s", req.URL.Path, res.Status, raw)
	}
	return env.Data, nil
}

// pages gets the audit log's pages from k's cursor on: only the first
// unless k.all. It returns them as one {items, nextCursor} and the cursor
// of the page after the last it got ("" at the end).
func (cl *admin) pages(k *call) (json.RawMessage, string, error) {
	var all struct {
		Items      []json.RawMessage `json:"items"`
		NextCursor *string           `json:"nextCursor"`
	}
	all.Items = []json.RawMessage{}
	path, seen := k.path, map[string]bool{}
	for {
		data, err := cl.do("GET", path, nil)
		if err != nil {
			return nil, "", err
		}
		var page struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return nil, "", fmt.Errorf("an audit page is not {items, nextCursor}: %v", err)
		}
		all.Items = append(all.Items, page.Items...)
		if page.NextCursor == "" || !k.all {
			if page.NextCursor != "" {
				all.NextCursor = &page.NextCursor
			}
			out, err := json.Marshal(all)
			return out, page.NextCursor, err
		}
		if seen[page.NextCursor] {
			return nil, "", fmt.Errorf("the audit log answered cursor %q twice", page.NextCursor)
		}
		seen[page.NextCursor] = true
		u, _ := url.Parse(path)
		q := u.Query()
		q.Set("cursor", page.NextCursor)
		u.RawQuery = q.Encode()
		path = u.String()
	}
}

// redact hides the admin token in a message: an error can quote what a
// server or a proxy echoed.
func (cl *admin) redact(s string) string {
	if cl.token == "" {
		return s
	}
	return strings.ReplaceAll(s, cl.token, "[token]")
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

const globalHelp = `Global flags, anywhere on the line:
  -o table|json   how to print the answer (default table; json prints the answer's data)
  --url URL       the admin API's scheme, host and port (default $SLIP_ADMIN_URL, else ` + defaultURL + `)
  --token TOKEN   the admin token (default $SLIP_ADMIN_TOKEN)
`

// usage prints every command.
func usage(w io.Writer) {
	fmt.Fprint(w, "usage: slipadm <noun> <verb> [flags]\n\nCommands (slipadm <noun> <verb> -h for their flags):\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-24s %s\n", c.name(), c.help)
	}
	fmt.Fprint(w, "\n"+globalHelp)
}

// usage prints the command's help: its flags and its arguments.
func (c *command) usage(w io.Writer) {
	var args []string
	for _, f := range c.fields {
		if strings.HasPrefix(f.to, "{") {
			args = append(args, " ["+f.flag+"]")
		}
	}
	fmt.Fprintf(w, "usage: slipadm %s [flags]%s\n\n%s\n", c.name(), strings.Join(args, ""), c.help)
	if len(args) > 0 {
		fmt.Fprintf(w, "The arguments stand for the flags of the same names.\n")
	}
	fs := c.flags()
	fs.SetOutput(w)
	fmt.Fprintln(w, "\nFlags:")
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+globalHelp)
}
