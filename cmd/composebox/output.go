package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Every invocation prints its outcome in one place. A verb hands its result to setResult
// (a value that marshals to a JSON object, and the text a person reads) and returns its error;
// finish then writes, once:
//   - with --json: exactly one JSON document on stdout, the result's members plus, on failure,
//     an "error" member {kind, message, exit_code};
//   - without: the text on stdout, and the error as `composebox: <kind>: <message>` on stderr.
//
// Nothing else writes a result: what streams as it happens (an exec'd command's output, the
// progress lines on stderr) is not the result.

// outcome is what a verb set with setResult.
type outcome struct {
	set   bool
	value any
	text  func(w io.Writer) error
}

// setResult records the verb's result: value for --json, text (may be nil: the result was
// already streamed) for a person.
func (g *globals) setResult(value any, text func(w io.Writer) error) {
	g.out = outcome{set: true, value: value, text: text}
}

// writeResultNow writes the result set so far at once, for a verb that goes on running after
// it has a result (up --warm keeps its pool until interrupted). finish then writes only an
// error, if one comes.
func (g *globals) writeResultNow() error {
	if !g.out.set {
		return nil
	}
	var err error
	if g.JSON {
		err = writeDocument(g.stdout, g.out.value, nil)
	} else if g.out.text != nil {
		err = g.out.text(g.stdout)
	}
	g.out = outcome{}
	return err
}

// errorJSON is the "error" member of a failed command's JSON document.
type errorJSON struct {
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
}

// finish writes the invocation's result and error, and returns the process exit code.
func (g *globals) finish(ctx context.Context, err error) int {
	code := exitCode(err)
	var ee exitError
	silent := errors.As(err, &ee) && ee.silent
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) && !(g.stopsOnSignal && err == nil) {
		// Whatever the verb made of its cancelled context, the process was interrupted.
		code = sig.exitCode()
		if err == nil {
			err = sig
		} else if !errors.Is(err, sig) {
			err = fmt.Errorf("%w: %w", sig, err)
		}
		silent = false
	}
	var ej *errorJSON
	if err != nil && (!silent || ee.err != nil) {
		ej = &errorJSON{Kind: kindOf(ctx, err), Message: strings.TrimSpace(err.Error()), ExitCode: code}
	}
	if g.JSON {
		if g.out.set || ej != nil {
			if werr := writeDocument(g.stdout, g.out.value, ej); werr != nil {
				fmt.Fprintf(g.stderr, "composebox: internal: write the JSON result: %v\n", werr)
			}
		}
	} else if g.out.text != nil {
		if werr := g.out.text(g.stdout); werr != nil && ej == nil {
			ej = &errorJSON{Kind: "internal", Message: "write the result: " + werr.Error(), ExitCode: exitFailure}
			code = exitFailure
		}
	}
	if ej != nil && !silent {
		fmt.Fprintf(g.stderr, "composebox: %s: %s\n", ej.Kind, ej.Message)
		if ej.Kind == "usage" {
			fmt.Fprintf(g.stderr, "see '%s --help'\n", cmp.Or(g.helpCommand, "composebox"))
		}
	}
	return code
}

// kindOf is the error kind the CLI reports: usage for a command line it cannot understand,
// interrupted for a signal, else the library's category.
func kindOf(ctx context.Context, err error) string {
	var ue usageError
	var sig interrupted
	switch {
	case errors.As(err, &sig):
		return "interrupted"
	case errors.As(err, &ue):
		return "usage"
	}
	return errorKind(err)
}

// writeDocument writes value's JSON object with an "error" member added when e is set, as one
// indented document. A value that is not an object is put under "result".
func writeDocument(w io.Writer, value any, e *errorJSON) error {
	doc := []byte("{}")
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			return err
		}
		if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '{' {
			doc = b
		} else if !bytes.Equal(b, []byte("null")) {
			doc = append(append([]byte(`{"result":`), b...), '}')
		}
	}
	if e != nil {
		eb, err := json.Marshal(e)
		if err != nil {
			return err
		}
		body := bytes.TrimSpace(doc[1 : len(doc)-1])
		var out bytes.Buffer
		out.WriteByte('{')
		if len(body) > 0 {
			out.Write(body)
			out.WriteByte(',')
		}
		out.WriteString(`"error":`)
		out.Write(eb)
		out.WriteByte('}')
		doc = out.Bytes()
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, doc, "", "  "); err != nil {
		return err
	}
	pretty.WriteByte('\n')
	_, err := w.Write(pretty.Bytes())
	return err
}
