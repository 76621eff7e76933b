package text

import "testing"

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
