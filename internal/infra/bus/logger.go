package bus

import (
	"fmt"
	"log/slog"
)

// slogLogger adapts slog to the nats-server logger interface. Notices and
// debug lines go to debug level: the embedded server is an implementation
// detail of the command, not something to print on every start.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Noticef(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s slogLogger) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s slogLogger) Fatalf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s slogLogger) Errorf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s slogLogger) Debugf(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s slogLogger) Tracef(format string, v ...any)  {}
