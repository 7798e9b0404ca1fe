// Command gencodes writes what commands/codes.json is the source of (see
// package codegen). go generate ./commands/ runs it from commands/.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/svc/engine/commands/internal/codegen"
)

func main() {
	root := flag.String("root", "..", "the module root")
	flag.Parse()
	if err := codegen.Write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "gencodes:", err)
		os.Exit(1)
	}
}
