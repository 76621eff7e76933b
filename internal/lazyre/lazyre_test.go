package lazyre

import (
	"strings"
	"testing"
)

func TestCompiledOnFirstUseOnly(t *testing.T) {
	r := New(`(\w+)@(\w+)`)
	if r.re != nil {
		t.Fatal("compiled before its first use")
	}
	if got := r.FindStringSubmatch("mail ann@example"); len(got) != 3 || got[1] != "ann" {
		t.Errorf("FindStringSubmatch = %q", got)
	}
	first := r.Regexp()
	if r.Regexp() != first {
		t.Error("compiled twice")
	}
	if !r.MatchString("a@b") || r.MatchString("ab") {
		t.Error("MatchString")
	}
	if got := r.ReplaceAllString("a@b c@d", "$2"); got != "b d" {
		t.Errorf("ReplaceAllString = %q", got)
	}
	if got := r.ReplaceAllStringFunc("a@b", strings.ToUpper); got != "A@B" {
		t.Errorf("ReplaceAllStringFunc = %q", got)
	}
	if got := r.FindAllStringIndex("a@b c@d", -1); len(got) != 2 || got[1][0] != 4 {
		t.Errorf("FindAllStringIndex = %v", got)
	}
	if got := r.FindAllStringSubmatch("a@b c@d", -1); len(got) != 2 || got[1][2] != "d" {
		t.Errorf("FindAllStringSubmatch = %q", got)
	}
}

func TestCheckFindsAnInvalidExpression(t *testing.T) {
	if err := Check(New(`a+`), New(`b(`)); err == nil {
		t.Error("Check passed an unclosed group")
	}
	if err := Check(New(`a+`)); err != nil {
		t.Error(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("an invalid expression did not panic on first use")
		}
	}()
	New(`b(`).MatchString("b")
}
