package main

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/loopbot/loopbot/agent"
)

// The config file is decoded in two passes. The first walks the document with go-toml's
// parser and compares every value with the Go type it will land in: go-toml itself puts a
// bare number into a duration as nanoseconds (max_wall = 30 would end every run at once),
// and its own type errors name Go types, which mean nothing to the person editing the file.
// The second pass is go-toml's strict decoder, whose remaining errors (syntax, unknown keys,
// values our types refuse) carry the line and the key.

var (
	durationType      = reflect.TypeFor[agent.Duration]()
	riskType          = reflect.TypeFor[agent.Risk]()
	textUnmarshalType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodeConfig decodes TOML strictly into cfg. Every error starts with path:line:column and
// names the key; a wrong type says what the key wants in plain words.
func decodeConfig(path string, data []byte, cfg *Config) error {
	c := typeChecker{path: path}
	c.p.Reset(data)
	if errs := c.check(reflect.TypeOf(cfg).Elem()); len(errs) > 0 {
		return errors.Join(errs...)
	}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return decodeError(path, dec.Decode(cfg), reflect.TypeOf(cfg).Elem())
}

// decodeError turns an error of go-toml's decoder into lines that start with
// path:line:column and name the key; root is the type decoded into.
func decodeError(path string, err error, root reflect.Type) error {
	if err == nil {
		return nil
	}
	if strict, ok := errors.AsType[*toml.StrictMissingError](err); ok {
		var errs []error
		for _, e := range strict.Errors {
			row, col := e.Position()
			errs = append(errs, fmt.Errorf("%s:%d:%d: unknown key %q", path, row, col, strings.Join(e.Key(), ".")))
		}
		return errors.Join(errs...)
	}
	if de, ok := errors.AsType[*toml.DecodeError](err); ok {
		row, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		key := de.Key()
		if len(key) == 0 {
			return fmt.Errorf("%s:%d:%d: %s", path, row, col, msg)
		}
		if speaksGo(msg) {
			// The first pass should have caught this; never show go-toml's Go type names.
			msg = "a value of the wrong type"
			if t, n := fieldType(root, key); t != nil {
				key, msg = key[:n], "want "+describe(t)
			}
		}
		return fmt.Errorf("%s:%d:%d: %s: %s", path, row, col, strings.Join(key, "."), msg)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// speaksGo reports whether a go-toml message is about Go types rather than the file.
func speaksGo(msg string) bool {
	return strings.Contains(msg, "cannot decode") || strings.Contains(msg, "cannot store") ||
		strings.Contains(msg, "cannot be stored") || strings.Contains(msg, "of type")
}

// typeChecker is the first pass: it reports every value whose TOML type does not fit its key.
type typeChecker struct {
	path string
	p    unstable.Parser
	errs []error
}

// check walks the document against the type of the whole file. A syntax error stops the
// walk and is left to the decoder, which reports it with its position.
func (c *typeChecker) check(root reflect.Type) []error {
	var table []string
	for c.p.NextExpression() {
		e := c.p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyParts(e.Key())
			t, n := fieldType(root, table)
			switch {
			case t == nil:
				continue // an unknown key: the decoder names it
			case n < len(table):
				c.failKey(e.Key(), table[:n], fmt.Sprintf("want %s, not a table", describe(t)))
				continue
			}
			if k := indirect(t).Kind(); k != reflect.Struct && k != reflect.Map && !(e.Kind == unstable.ArrayTable && k == reflect.Slice) {
				c.failKey(e.Key(), table, fmt.Sprintf("want %s, not a table", describe(t)))
			}
		case unstable.KeyValue:
			c.keyValue(root, table, e)
		}
	}
	if c.p.Error() != nil {
		return nil
	}
	return c.errs
}

// keyValue checks one key = value line (or one entry of an inline table) under table.
func (c *typeChecker) keyValue(root reflect.Type, table []string, kv *unstable.Node) {
	key := append(append([]string(nil), table...), keyParts(kv.Key())...)
	t, n := fieldType(root, key)
	switch {
	case t == nil:
		return // an unknown key: the decoder names it
	case n < len(key):
		c.failKey(kv.Key(), key[:n], fmt.Sprintf("want %s, not a table", describe(t)))
		return
	}
	c.value(root, key, t, kv.Value())
}

// value checks that v fits t, and inside lists and inline tables each of their entries.
func (c *typeChecker) value(root reflect.Type, key []string, t reflect.Type, v *unstable.Node) {
	t = indirect(t)
	if t.Kind() == reflect.Interface {
		return
	}
	if t == durationType && (v.Kind == unstable.Integer || v.Kind == unstable.Float) {
		c.fail(v, key, agent.ErrDurationUnit.Error())
		return
	}
	if reflect.PointerTo(t).Implements(textUnmarshalType) {
		if v.Kind != unstable.String {
			c.wrong(v, key, t)
		}
		return // the type's own UnmarshalText judges the text, in the decoder
	}
	switch t.Kind() {
	case reflect.String:
		if v.Kind != unstable.String {
			c.wrong(v, key, t)
		}
	case reflect.Bool:
		if v.Kind != unstable.Bool {
			c.wrong(v, key, t)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Kind != unstable.Integer {
			c.wrong(v, key, t)
			return
		}
		if !fitsInteger(string(v.Data), t) {
			c.fail(v, key, fmt.Sprintf("%s is out of range", v.Data))
		}
	case reflect.Float32, reflect.Float64:
		if v.Kind != unstable.Integer && v.Kind != unstable.Float {
			c.wrong(v, key, t)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind != unstable.Array {
			c.wrong(v, key, t)
			return
		}
		it := v.Children()
		for i := 0; it.Next(); i++ {
			c.value(root, append(key[:len(key):len(key)], strconv.Itoa(i)), t.Elem(), it.Node())
		}
	case reflect.Map, reflect.Struct:
		if v.Kind != unstable.InlineTable {
			c.wrong(v, key, t)
			return
		}
		it := v.Children()
		for it.Next() {
			c.keyValue(root, key, it.Node())
		}
	}
}

// wrong reports a value of the wrong TOML type for t.
func (c *typeChecker) wrong(v *unstable.Node, key []string, t reflect.Type) {
	c.fail(v, key, fmt.Sprintf("want %s, not %s", describe(t), kindWords(v.Kind)))
}

// fail records an error about key at the start of value v.
func (c *typeChecker) fail(v *unstable.Node, key []string, msg string) {
	c.failAt(c.p.Shape(v.Raw).Start, key, msg)
}

// failKey records an error about key at the last part of the key k as the file writes it
// (the part at fault, in a dotted key or a table header).
func (c *typeChecker) failKey(k unstable.Iterator, key []string, msg string) {
	var pos unstable.Position
	for k.Next() {
		pos = c.p.Shape(k.Node().Raw).Start
	}
	c.failAt(pos, key, msg)
}

func (c *typeChecker) failAt(pos unstable.Position, key []string, msg string) {
	c.errs = append(c.errs, fmt.Errorf("%s:%d:%d: %s: %s", c.path, pos.Line, pos.Column, keyString(key), msg))
}

// keyString writes a key as the file would, with list positions as [i].
func keyString(key []string) string {
	var b strings.Builder
	for i, k := range key {
		if _, err := strconv.Atoi(k); err == nil && i > 0 {
			b.WriteString("[" + k + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(k)
	}
	return b.String()
}

func keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

// fieldType finds the Go type a dotted key of the file decodes into, as go-toml finds it:
// struct fields by their toml tag (untagged embedded structs are flattened), map entries by
// any key, and through a list of tables (an [[array]]) into its element. It returns the type
// and how many parts of the key it used: all of them when the key is found; fewer when the
// key goes on past a value that is not a table, whose type it returns. A key the file may
// not have returns nil.
func fieldType(t reflect.Type, key []string) (reflect.Type, int) {
	for i, k := range key {
		t = indirect(t)
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			if _, err := strconv.Atoi(k); err == nil {
				t = t.Elem() // an entry of a list, as the first pass names them
				continue
			}
			if !isTable(t.Elem()) {
				return t, i
			}
			t = indirect(t.Elem()) // [[mcp.servers]], then a key of one server
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := structField(t, k)
			if !ok {
				return nil, i
			}
			t = f
		case reflect.Map:
			t = t.Elem()
		default:
			return t, i
		}
	}
	return t, len(key)
}

func isTable(t reflect.Type) bool {
	k := indirect(t).Kind()
	return k == reflect.Struct || k == reflect.Map
}

// structField finds the field of struct t that key k names.
func structField(t reflect.Type, k string) (reflect.Type, bool) {
	var fold reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if f.Anonymous && name == "" && indirect(f.Type).Kind() == reflect.Struct {
			if ft, ok := structField(indirect(f.Type), k); ok {
				return ft, true
			}
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == k {
			return f.Type, true
		}
		if fold == nil && strings.EqualFold(name, k) {
			fold = f.Type
		}
	}
	return fold, fold != nil
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// describe says in plain words what a key of type t wants.
func describe(t reflect.Type) string {
	t = indirect(t)
	switch {
	case t == durationType:
		return `a duration with a unit, like "30s" or "5m"`
	case t == riskType:
		return `a risk level ("safe", "cautious", "confirm" or "dangerous")`
	case reflect.PointerTo(t).Implements(textUnmarshalType):
		return "text"
	}
	switch t.Kind() {
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, not negative"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		switch d := describe(t.Elem()); {
		case d == "text":
			return "a list of text"
		case d == "a table":
			return "a list of tables"
		default:
			return "a list"
		}
	case reflect.Map, reflect.Struct:
		return "a table"
	}
	return "another kind of value"
}

// kindWords names a TOML value's type in plain words.
func kindWords(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "text"
	case unstable.Integer:
		return "a number"
	case unstable.Float:
		return "a decimal number"
	case unstable.Bool:
		return "true or false"
	case unstable.Array:
		return "a list"
	case unstable.InlineTable:
		return "a table"
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return "a date or time"
	}
	return "another kind of value"
}

// fitsInteger reports whether the TOML integer s fits in t. A number that does not parse is
// left to the decoder, which reports it.
func fitsInteger(s string, t reflect.Type) bool {
	s = strings.ReplaceAll(s, "_", "")
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.HasPrefix(s, "-") {
			return s == "-0"
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 0, 64)
		return err != nil || !v.OverflowUint(n)
	default:
		n, err := strconv.ParseInt(s, 0, 64)
		if errors.Is(err, strconv.ErrRange) {
			return false
		}
		return err != nil || !v.OverflowInt(n)
	}
}
