package judge

import "time"

var testTime = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
