package resp

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/segments"
)

// command is how one command is answered: arity is its number of arguments, the name
// included (negative: at least -arity), and open says whether it needs no AUTH first.
type command struct {
	name  string // its key in commands
	run   func(s *Server, c *conn, args [][]byte)
	arity int
	open  bool
}

// commands lists every command the listener answers; every other one, writes included, is an
// error saying what bigseg serves. Names are lower case; clients may send any case.
var commands = map[string]command{
	// The reads of an SDK's Redis Big Segment store.
	"get":      {name: "get", run: (*Server).get, arity: 2},
	"smembers": {name: "smembers", run: (*Server).smembers, arity: 2},

	// What clients send of their own, on connecting and around.
	"ping":    {name: "ping", run: (*Server).ping, arity: -1, open: true},
	"echo":    {name: "echo", run: (*Server).echo, arity: 2},
	"auth":    {name: "auth", run: (*Server).auth, arity: -2, open: true},
	"hello":   {name: "hello", run: (*Server).hello, arity: -1, open: true},
	"select":  {name: "select", run: (*Server).selectDB, arity: 2},
	"client":  {name: "client", run: (*Server).client, arity: -2},
	"info":    {name: "info", run: (*Server).info, arity: -1},
	"command": {name: "command", run: (*Server).commandInfo, arity: -1},
	"quit":    {name: "quit", run: (*Server).quit, arity: 1, open: true},
	"reset":   {name: "reset", run: (*Server).reset, arity: 1, open: true},
}

// dispatch answers one command.
func (s *Server) dispatch(c *conn, args [][]byte) {
	start := time.Now()
	c.now = start
	// The name in lower case in a buffer of the stack: looking it up allocates nothing.
	var lower [16]byte
	raw, known := args[0], false
	var cmd command
	if len(raw) <= len(lower) {
		for i, b := range raw {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			lower[i] = b
		}
		cmd, known = commands[string(lower[:len(raw)])]
	}
	name := cmd.name
	if !known {
		name = strings.ToLower(string(raw))
	}
	label := name
	before := len(c.out)
	c.sentPiece = false
	c.prev, c.last = c.last, lookup{} // an SMEMBERS's lookup serves the command right after it only
	c.ctx = c.gone
	var span trace.Span
	if s.tracer != nil {
		c.ctx, span = s.tracer.Start(c.ctx, "OTHER", spanStart...) // named once the command is known
	}
	switch {
	case !known && (name == "post" || name == "host:"):
		// HTTP sent to this port, maybe by a browser made to (cross-protocol scripting):
		// closed without an answer, as Redis does.
		label, c.closing = "other", true
	case !known:
		label = "other"
		c.out = redcon.AppendError(c.out, "ERR unknown command '"+printable(name)+"': "+s.expected(c)+" (read only)")
	case len(args) > maxArgs || cmd.arity > 0 && len(args) != cmd.arity || cmd.arity < 0 && len(args) < -cmd.arity:
		c.out = redcon.AppendError(c.out, "ERR wrong number of arguments for '"+name+"' command")
	case s.cfg.Tokens.Enabled() && (!cmd.open || c.session != nil) && !s.signedIn(c):
		// signedIn answered: a connection signed in is checked at every command, PING too
	default:
		cmd.run(s, c, args)
	}
	// An answer sent in pieces is an array; any other is whole in c.out from before.
	failed := !c.sentPiece && len(c.out) > before && c.out[before] == '-'
	s.cfg.Observe(label, failed, time.Since(start))
	if span != nil {
		endSpan(span, label, failed)
	}
}

// spanStart are the options of every command's span.
var spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
	trace.WithAttributes(semconv.DBSystemNameRedis)}

// endSpan ends a command's span, which never holds an argument (keys, AUTH's token): named by
// its label in upper case as Redis writes commands (OTHER for one not known, whose name is
// the client's and may be anything), with an error status when it answered an error.
func endSpan(span trace.Span, label string, failed bool) {
	if span.IsRecording() {
		name := strings.ToUpper(label)
		span.SetName(name)
		span.SetAttributes(semconv.DBOperationName(name))
		if failed {
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}

// printable is a client's command name as an answer may quote it: short, and no control
// characters.
func printable(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// get answers GET {prefix}:big_segments_synchronized_on from the status poller's last poll, as
// Redis would hold it: unix milliseconds, nil when never synchronized; an error while the
// store is unavailable, so that the SDK reports it unavailable. It never reads the store.
func (s *Server) get(c *conn, args [][]byte) {
	env, kind, _ := s.keys.parse(string(args[1]))
	if env == nil || kind != keySynchronizedOn {
		c.out = redcon.AppendError(c.out, "ERR "+s.expected(c))
		return
	}
	if !s.opens(c, env) {
		return
	}
	st, polled := env.Status()
	switch {
	case !polled || !st.Available:
		c.out = redcon.AppendError(c.out, "ERR the Big Segment store is unavailable")
	case st.LastSynchronized.IsZero():
		c.out = redcon.AppendNull(c.out)
	default:
		c.out = redcon.AppendBulkString(c.out, strconv.FormatInt(st.LastSynchronized.UnixMilli(), 10))
	}
}

// lookup is a context's answer, kept for the SMEMBERS of its other set that follows.
type lookup struct {
	env    *segments.Environment
	hash   string
	kind   int // the set asked for with it
	answer segments.Answer
	// written is when the answer was last written to the connection, whole or its last
	// piece; zero while it is not yet (a command pipelined behind it is answered before).
	written time.Time
}

// pairWindow is how soon after the answer to the SMEMBERS of one of a context's sets is written
// that of the other must arrive to be answered from the same lookup. It is measured from the
// write, not from the lookup: a lookup that takes longer (a slow store, a wait for a read slot)
// still answers the pair.
const pairWindow = time.Second

// smembers answers SMEMBERS of a context's include or exclude set: the refs bigseg's lookup of
// the context holds included, or excluded (a ref in both sets in Redis is included, which is
// how an SDK evaluates it anyway). An SDK asks for both sets, one after the other: the second,
// when it is the next command of the connection and arrives within pairWindow of the first's
// answer (or before it was written), is answered from the first's lookup however long that
// took, so that the pair is one store read even with the cache off, and both sets come from
// the same read. A failed read is an error, never an empty set. A large answer is sent in
// pieces of flushBytes as it is made from the membership, which the cache shares: a client
// that does not read it makes the connection hold one buffer, not a copy of its refs.
func (s *Server) smembers(c *conn, args [][]byte) {
	env, kind, hash := s.keys.parse(string(args[1]))
	if env == nil || kind == keySynchronizedOn {
		c.out = redcon.AppendError(c.out, "ERR "+s.expected(c))
		return
	}
	if !s.opens(c, env) {
		return
	}
	var a segments.Answer
	if p := c.prev; p.env == env && p.hash == hash && p.kind != kind && (p.written.IsZero() || c.now.Sub(p.written) < pairWindow) {
		a = p.answer // its hash was checked with it
	} else {
		if err := validHash(hash); err != nil {
			c.out = redcon.AppendError(c.out, "ERR "+err.Error())
			return
		}
		c.watch()
		a = env.LookupHash(c.ctx, hash)
		c.unwatch()
		c.last = lookup{env: env, hash: hash, kind: kind, answer: a}
	}
	if a.Err != nil {
		c.out = redcon.AppendError(c.out, "ERR the Big Segment store could not be read")
		return
	}
	want, n := kind == keyInclude, 0 // counted first, so that no slice of the refs is made
	for _, included := range a.Membership.All() {
		if included == want {
			n++
		}
	}
	c.out = redcon.AppendArray(c.out, n)
	for ref, included := range a.Membership.All() {
		if included != want {
			continue
		}
		if len(c.out) >= flushBytes && !s.sendPiece(c) || !s.appendRef(c, ref) {
			return
		}
	}
}

// appendRef appends ref as a bulk string. A ref longer than flushBytes is appended a piece at a
// time, each sent once the buffer holds flushBytes, so that no ref is ever copied whole into a
// connection's buffer either; false if a piece could not be sent.
func (s *Server) appendRef(c *conn, ref string) bool {
	if len(ref) <= flushBytes {
		c.out = redcon.AppendBulkString(c.out, ref)
		return true
	}
	c.out = append(strconv.AppendInt(append(c.out, '$'), int64(len(ref)), 10), '\r', '\n')
	for len(ref) > 0 {
		if len(c.out) >= flushBytes && !s.sendPiece(c) {
			return false
		}
		n := min(len(ref), flushBytes)
		c.out, ref = append(c.out, ref[:n]...), ref[n:]
	}
	c.out = append(c.out, '\r', '\n')
	return true
}

func (s *Server) ping(c *conn, args [][]byte) {
	switch {
	case len(args) > 2:
		c.out = redcon.AppendError(c.out, "ERR wrong number of arguments for 'ping' command")
	case len(args) == 2:
		c.out = redcon.AppendBulk(c.out, args[1])
	default:
		c.out = redcon.AppendString(c.out, "PONG")
	}
}

func (s *Server) echo(c *conn, args [][]byte) { c.out = redcon.AppendBulk(c.out, args[1]) }

// auth answers AUTH token or AUTH user token: the user name is ignored, and the password is a
// bigseg API token. Failed attempts close the connection after maxAuthFailures.
func (s *Server) auth(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.out = redcon.AppendError(c.out, "ERR syntax error")
		return
	}
	if s.authenticate(c, args[len(args)-1]) {
		c.out = redcon.AppendOK(c.out)
	}
}

// authenticate checks token, answering the error of a wrong one; true when it opens the
// connection (always, without tokens: AUTH is then accepted, as a Redis without a password
// would not, so that SDKs configured with a password work either way). The token's scope is
// checked at each read, against the environment of the key read (see opens).
func (s *Server) authenticate(c *conn, token []byte) bool {
	if !s.cfg.Tokens.Enabled() {
		return true
	}
	if c.session = s.cfg.Tokens.Session(string(token)); c.session != nil {
		return true
	}
	c.failed++
	c.out = redcon.AppendError(c.out, "WRONGPASS invalid username-password pair or user is disabled.")
	if c.failed >= maxAuthFailures {
		c.closing = true
	}
	return false
}

// signedIn says whether the connection's AUTH holds, answering NOAUTH if not. A token revoked
// since (the tokens file changed) ends the connection once that is answered, as Redis closes
// the connections of a user deleted: its pooled connections do not outlive the token.
func (s *Server) signedIn(c *conn) bool {
	switch {
	case c.session == nil:
		c.out = redcon.AppendError(c.out, "NOAUTH Authentication required.")
		return false
	case c.session.Scope() == nil:
		c.session, c.closing = nil, true
		c.out = redcon.AppendError(c.out, "NOAUTH the token of this connection is no longer accepted")
		return false
	}
	return true
}

// expected is what a client is told the keys are: with tokens, without the prefixes until it
// has signed in (a signed-in client with a wrong prefix is told the ones served, to fix it).
func (s *Server) expected(c *conn) string {
	if s.cfg.Tokens.Enabled() && c.session == nil {
		return s.keys.generic
	}
	return s.keys.expected
}

// opens says whether the connection's token opens env, answering NOPERM if not. Its scope is
// the token's as the tokens are now: a token rescoped opens what it now does.
func (s *Server) opens(c *conn, env *segments.Environment) bool {
	if !s.cfg.Tokens.Enabled() || c.session.Scope().Opens(env.Name) {
		return true
	}
	c.out = redcon.AppendError(c.out, "NOPERM this token does not open environment "+env.Name+" (prefix "+strconv.Quote(servedPrefix(env))+")")
	return false
}

// hello answers HELLO [protover [AUTH user token] [SETNAME name]]: RESP2 only (HELLO 3 gets
// NOPROTO, and clients fall back to RESP2, as with a Redis without RESP3).
func (s *Server) hello(c *conn, args [][]byte) {
	if len(args) > 1 {
		// Integers as Redis reads them: no sign but a minus, no leading zero.
		switch v, err := strconv.ParseInt(string(args[1]), 10, 64); {
		case err != nil || strconv.FormatInt(v, 10) != string(args[1]):
			c.out = redcon.AppendError(c.out, "ERR Protocol version is not an integer or out of range")
			return
		case v != 2:
			c.out = redcon.AppendError(c.out, "NOPROTO sorry, this protocol version is not supported")
			return
		}
	}
	var name []byte // SETNAME's, taken once the HELLO is accepted
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "auth" && i+2 < len(args):
			if !s.authenticate(c, args[i+2]) {
				return
			}
			i += 2
		case opt == "setname" && i+1 < len(args):
			name = args[i+1]
			i++
		default:
			c.out = redcon.AppendError(c.out, "ERR Syntax error in HELLO option '"+printable(opt)+"'")
			return
		}
	}
	if s.cfg.Tokens.Enabled() && c.session == nil {
		c.out = redcon.AppendError(c.out, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if name != nil && !c.setName(name) {
		return
	}
	c.out = redcon.AppendArray(c.out, 14)
	for _, kv := range [][2]string{{"server", "redis"}, {"version", redisVersion}, {"proto", ""}, {"id", ""},
		{"mode", "standalone"}, {"role", "master"}, {"modules", ""}} {
		c.out = redcon.AppendBulkString(c.out, kv[0])
		switch kv[0] {
		case "proto":
			c.out = redcon.AppendInt(c.out, 2)
		case "id":
			c.out = redcon.AppendInt(c.out, c.id)
		case "modules":
			c.out = redcon.AppendArray(c.out, 0)
		default:
			c.out = redcon.AppendBulkString(c.out, kv[1])
		}
	}
}

// redisVersion is the Redis version bigseg answers as: one whose commands and replies
// clients know (bigseg's own version is in INFO).
const redisVersion = "7.0.0"

// selectDB answers SELECT: only database 0 exists.
func (s *Server) selectDB(c *conn, args [][]byte) {
	if string(args[1]) != "0" {
		c.out = redcon.AppendError(c.out, "ERR DB index is out of range: bigseg serves database 0 only")
		return
	}
	c.out = redcon.AppendOK(c.out)
}

// client answers CLIENT SETNAME, GETNAME, ID and SETINFO.
func (s *Server) client(c *conn, args [][]byte) {
	switch sub := strings.ToLower(string(args[1])); {
	case sub == "setname" && len(args) == 3:
		if c.setName(args[2]) {
			c.out = redcon.AppendOK(c.out)
		}
	case sub == "getname" && len(args) == 2:
		if c.name == "" {
			c.out = redcon.AppendNull(c.out)
		} else {
			c.out = redcon.AppendBulkString(c.out, c.name)
		}
	case sub == "id" && len(args) == 2:
		c.out = redcon.AppendInt(c.out, c.id)
	case sub == "setinfo" && len(args) == 4:
		c.out = redcon.AppendOK(c.out)
	default:
		c.out = redcon.AppendError(c.out, "ERR bigseg answers CLIENT SETNAME, GETNAME, ID and SETINFO only")
	}
}

// setName takes name as the connection's, answering the error of one Redis refuses (spaces,
// newlines, special characters).
func (c *conn) setName(name []byte) bool {
	for _, b := range name {
		if b <= ' ' || b > '~' {
			c.out = redcon.AppendError(c.out, "ERR Client names cannot contain spaces, newlines or special characters.")
			return false
		}
	}
	c.name = string(name)
	return true
}

// info answers INFO with what clients look at: a server section, and loading:0 (ioredis's
// ready check waits for it).
func (s *Server) info(c *conn, args [][]byte) {
	c.out = redcon.AppendBulkString(c.out, "# Server\r\nredis_version:"+redisVersion+"\r\nredis_mode:standalone\r\n"+
		"bigseg_version:"+s.cfg.Version+"\r\n\r\n# Persistence\r\nloading:0\r\n\r\n# Replication\r\nrole:master\r\n")
}

// commandInfo answers COMMAND and its subcommands, which clients probe: with nothing.
func (s *Server) commandInfo(c *conn, args [][]byte) {
	if len(args) > 1 && strings.EqualFold(string(args[1]), "count") {
		c.out = redcon.AppendInt(c.out, 0)
		return
	}
	c.out = redcon.AppendArray(c.out, 0)
}

// quit answers OK, then closes the connection.
func (s *Server) quit(c *conn, args [][]byte) {
	c.out = redcon.AppendOK(c.out)
	c.closing = true
}

// reset forgets what the connection said of itself, its AUTH included.
func (s *Server) reset(c *conn, args [][]byte) {
	c.session, c.name = nil, ""
	c.out = redcon.AppendString(c.out, "RESET")
}

// Commands are the names of the commands answered, for metrics: every other one is "other".
func Commands() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
