package compose

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/template"
)

// unsetRecorder collects the variables an interpolation found unset with no default. compose
// substitutes an empty string for each and warns; composebox warns through its own logger
// instead of compose-go's logrus, so that the warning can name the flags that set a variable
// and reach the caller once, in one format.
type unsetRecorder struct {
	mu    sync.Mutex
	names map[string]bool
}

func (u *unsetRecorder) add(name string) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.names == nil {
		u.names = map[string]bool{}
	}
	u.names[name] = true
}

func (u *unsetRecorder) sorted() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Sorted(maps.Keys(u.names))
}

// substitute interpolates s as compose-go does ($X, ${X}, ${X:-d}, ${X-d}, ${X:+a}, ${X+a},
// ${X:?msg}, ${X?msg}, $$ for a literal $, nesting in defaults), recording each variable that
// is unset and has no default instead of logging it. compose-go's own substitution logs such a
// variable through logrus from its nested calls (a default's text, and what follows a
// default in the same braces), which no option turns off; so the whole of it is done here.
func (u *unsetRecorder) substitute(s string, m template.Mapping) (string, error) {
	return template.SubstituteWithOptions(s, m, template.WithoutLogging,
		template.WithReplacementFunction(func(sub string, m template.Mapping, _ *template.Config) (string, error) {
			return u.replace(sub, m)
		}))
}

// The separators of braced expressions, in the order compose-go tries them when two start at
// the same place (":-" before "-", and so on).
var substitutionSeparators = []string{":?", "?", ":-", "-", ":+", "+"}

// replace is compose-go's DefaultReplacementAppliedFunc with the nested substitutions done by
// substitute, so that they record rather than log.
func (u *unsetRecorder) replace(sub string, m template.Mapping) (string, error) {
	rest := ""
	if i := firstBraceClosingIndex(sub); i > -1 {
		sub, rest = sub[:i+1], sub[i+1:]
	}
	match := template.DefaultPattern.FindStringSubmatch(sub)
	if match == nil {
		return "", &template.InvalidTemplateError{}
	}
	groups := map[string]string{}
	for i, name := range template.DefaultPattern.SubexpNames() {
		if name != "" && i < len(match) {
			groups[name] = match[i]
		}
	}
	if escaped := groups["escaped"]; escaped != "" {
		return escaped, nil
	}
	name, braced := groups["named"], false
	if name == "" {
		name, braced = groups["braced"], true
	}
	if name == "" {
		return "", &template.InvalidTemplateError{}
	}
	if braced {
		sep, at := "", -1
		for _, s := range substitutionSeparators {
			if i := strings.Index(name, s); i >= 0 && (at < 0 || i < at) {
				sep, at = s, i
			}
		}
		if sep != "" {
			v, err := u.modified(name[:at], sep, name[at+len(sep):], m)
			if err != nil {
				return "", err
			}
			tail, err := u.substitute(rest, m)
			if err != nil {
				return "", err
			}
			return v + tail, nil
		}
	}
	v, ok := m(name)
	if !ok {
		u.add(name)
	}
	return v, nil
}

// modified is the value of ${name<sep>arg}: a default, an alternative or a required variable,
// with arg itself interpolated first, as compose-go does.
func (u *unsetRecorder) modified(name, sep, arg string, m template.Mapping) (string, error) {
	arg, err := u.substitute(arg, m)
	if err != nil {
		return "", err
	}
	v, ok := m(name)
	colon := strings.HasPrefix(sep, ":")
	switch strings.TrimPrefix(sep, ":") {
	case "?":
		if !ok || (colon && v == "") {
			return "", &template.MissingRequiredError{Variable: name, Reason: arg}
		}
		return v, nil
	case "-":
		if !ok || (colon && v == "") {
			return arg, nil
		}
		return v, nil
	default: // "+"
		if ok && (!colon || v != "") {
			return arg, nil
		}
		return v, nil
	}
}

// firstBraceClosingIndex is where the braces opened by "${" close, as compose-go finds it.
func firstBraceClosingIndex(s string) int {
	open := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '}' {
			open--
			if open == 0 {
				return i
			}
		}
		if s[i] == '{' {
			open++
			i++
		}
	}
	return -1
}
