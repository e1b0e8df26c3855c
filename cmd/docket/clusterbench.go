package main

import (
	"context"
	"errors"
)

func runClusterBench(ctx context.Context, c cli, args []string) error {
	return errors.New("not yet")
}
