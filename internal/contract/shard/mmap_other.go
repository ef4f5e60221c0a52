//go:build !unix

package shard

import (
	"errors"
	"os"
)

// mapFile is not available here: ReadFile reads through the file.
func mapFile(*os.File) ([]byte, func(), error) { return nil, nil, errors.ErrUnsupported }
