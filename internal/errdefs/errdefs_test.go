package errdefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestCategoriesMatchStandardErrors(t *testing.T) {
	if !errors.Is(ErrNotFound, fs.ErrNotExist) {
		t.Error("ErrNotFound does not match fs.ErrNotExist")
	}
	if !errors.Is(ErrPermission, fs.ErrPermission) {
		t.Error("ErrPermission does not match fs.ErrPermission")
	}
	if errors.Is(ErrNotFound, fs.ErrPermission) {
		t.Error("ErrNotFound matches fs.ErrPermission")
	}
	if !errors.Is(ErrTimeout, context.DeadlineExceeded) {
		t.Error("ErrTimeout does not match context.DeadlineExceeded")
	}
}

func TestWrapKeepsCategoryAndCause(t *testing.T) {
	cause := errors.New("engine said no")
	err := fmt.Errorf("read /x in default: %w", Wrap(ErrNotFound, cause, "no such file"))
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, cause) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("wrapped error lost a match: %v", err)
	}
	if got, want := err.Error(), "read /x in default: no such file: engine said no"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

func TestKind(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{New(ErrInvalidConfig, "x"), "invalid_config"},
		{New(ErrPolicyViolation, "x"), "policy_violation"},
		{fmt.Errorf("ping: %w", New(ErrPrerequisite, "x")), "prerequisite"},
		{New(ErrNotFound, "x"), "not_found"},
		{New(ErrIsDirectory, "x"), "is_a_directory"},
		{New(ErrPermission, "x"), "permission_denied"},
		{New(ErrTimeout, "x"), "timeout"},
		{New(ErrOutputLimit, "x"), "output_limit"},
		{New(ErrUnavailable, "x"), "unavailable"},
		{New(ErrConflict, "x"), "conflict"},
		{fmt.Errorf("prepare images: %w", &BuildError{Image: "i", Step: "Step 2/2 : RUN false", Message: "exit 1"}), "build_failed"},
		{errors.New("boom"), "internal"},
		{Wrap(ErrPolicyViolation, New(ErrInvalidConfig, "inner"), "outer"), "policy_violation"},
	}
	for _, c := range cases {
		if got := Kind(c.err); got != c.want {
			t.Errorf("Kind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
