package text

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMembers(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want string // names and values joined, "" for not an object
		ok   bool
	}{
		{`{"b":1,"a":"x"}`, `b=1 a="x" `, true},
		{`{}`, ``, true},
		{`{"a":{"b":[1]}}`, `a={"b":[1]} `, true},
		{`[1]`, ``, false},
		{`{"a":`, ``, false},
		{`{} {}`, ``, false},
		{`{"a":1}x`, ``, false},
		{``, ``, false},
	} {
		ms, ok := Members(tt.raw)
		var got string
		for _, m := range ms {
			got += m.Name + "=" + string(m.Value) + " "
		}
		if ok != tt.ok || got != tt.want {
			t.Errorf("Members(%q) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzMembers: what Members accepts is one JSON object, and its members are its keys in
// order with valid values.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{}`, `{"a":{"b":[1,"\n"]}}`, `{"a":`, `[1]`, `{} {}`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ms, ok := Members(raw)
		if dms, dok := decodeMembers(raw); ok != dok || !reflect.DeepEqual(ms, dms) {
			t.Fatalf("Members(%q) = %q, %v; the decoder says %q, %v", raw, ms, ok, dms, dok)
		}
		var obj map[string]json.RawMessage
		isObject := json.Unmarshal([]byte(raw), &obj) == nil && obj != nil
		if ok != isObject {
			t.Fatalf("Members(%q) ok = %v, but encoding/json says object = %v", raw, ok, isObject)
		}
		for _, m := range ms {
			if !json.Valid(m.Value) {
				t.Fatalf("member %q of %q has invalid value %q", m.Name, raw, m.Value)
			}
			if _, found := obj[m.Name]; !found {
				t.Fatalf("member %q is not a key of %q", m.Name, raw)
			}
		}
	})
}

// TestMembersScanMatchesTheDecoder checks that the objects Members splits where they stand
// give what encoding/json's decoder gives, and that the rest go to the decoder.
func TestMembersScanMatchesTheDecoder(t *testing.T) {
	for _, raw := range []string{
		`{"path":"a.go","start":1,"end":-2.5e3}`,
		` { "a" : [ 1 , {"b": "}],{"} ] , "c":true,"d":null,"e":false } `,
		`{"s":"a \\\" , } ] x","n":0}`,
		`{"a":1,"a":2}`,
		`{"x":{}}`,
		`{"x":[]}`,
		"{\"t\":\"line one\\nline two\"}\n",
		`{"caf\u00e9":1}`,
		`{"a\"b":1}`,
		`{"é":"x"}`,
		`{"a":"é"}`,
		`[{"a":1}]`,
		`"{}"`,
		`{"a":1`,
	} {
		ms, ok := Members(raw)
		dms, dok := decodeMembers(raw)
		if ok != dok || !reflect.DeepEqual(ms, dms) {
			t.Errorf("Members(%q) = %q, %v; the decoder says %q, %v", raw, ms, ok, dms, dok)
		}
	}
}
