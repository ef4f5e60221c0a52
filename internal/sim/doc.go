// Package sim is codapipe's SIMULATOR: a ScienceBoard-like digital twin that
// stands in for the two things that cannot run on our machines — VMs with
// scientific applications, and 7B–72B models on GPUs — so that every other
// part of codapipe runs and is tested for real.
//
// It is always labelled a simulator: its screenshots carry "SIMULATOR" on
// screen, its guest server answers GET /platform with "Linux (codapipe
// simulator)", and its model endpoints name their models "sim-*".
//
// Parts, one sub-package each:
//   - desktop: one simulated VM (Machine) — a 1280×800 desktop running the
//     apps of its catalogue, driven by pyautogui-level input events (the
//     pyautogui and shell interpreters live there too), rendered to PNG
//     screenshots that carry the simulated state in an invisible PNG text
//     chunk; it defines the app interface (App, AppSpec).
//   - apps: the catalogue of the simulated apps, one package each below it
//     (chimerax, celestia, kalgebra, grass).
//   - screen: drawing primitives and the PNG encoder; expr: the expression
//     language of KAlgebra and GRASS.
//   - tasks: tasks in the ScienceBoard JSON format with a hidden oracle plan
//     (taskgen renders them from the apps' task specs).
//   - guest: a Machine's two HTTP servers, as a real ScienceBoard VM has
//     them: the guest server (port 5000, ScienceBoard's server.py) and the
//     app server (port 8000, the running app's own server), plus an
//     in-process caller of both.
//   - models: OpenAI-compatible planner, executor and judge endpoints.
//   - fault: fault and latency injection scaled by one time factor.
//
// This package wires them into a world (StartWorld: N machines, each
// behind its guest and app servers, plus the model endpoints; the
// machines of a world look the same). Callers that need one part import its sub-package.
//
// Everything is seeded: the same seed and configuration reproduce a run
// byte for byte.
package sim
