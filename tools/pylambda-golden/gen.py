#!/usr/bin/env python3
"""Differential goldens for internal/contract/scienceboard/pylambda.

Evaluates every Python lambda of the ScienceBoard task files (and a list of
extra lambdas that exercise the translation) with CPython, on inputs shaped
like each app's real state dumps, and writes the results to
internal/contract/scienceboard/pylambda/testdata/golden.json. The Go test replays the
same calls with Starlark and compares the results exactly (types included;
floats bit for bit).

Run it through `go test ./internal/contract/scienceboard/pylambda -run TestGolden -update`
or directly: python3 tools/pylambda-golden/gen.py [tasks-dir] [out-file].
ScienceBoard runs Python 3.11; use that version when regenerating.
"""

import copy
import datetime
import glob
import json
import os
import sys
import types
import builtins

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TASKS = os.path.join(ROOT, "testdata", "scienceboard", "tasks")
OUT = os.path.join(ROOT, "internal", "scienceboard", "pylambda", "testdata", "golden.json")

# The clock datetime.today() reads in the goldens (the Go test passes the
# same instant with WithNow).
NOW = datetime.datetime(2025, 3, 5, 7, 8, 9, 123456)


class FixedDatetime(datetime.datetime):
    @classmethod
    def today(cls):
        return cls(NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second, NOW.microsecond)

    @classmethod
    def now(cls, tz=None):
        return cls.today()


class FixedDate(datetime.date):
    @classmethod
    def today(cls):
        return cls(NOW.year, NOW.month, NOW.day)


FIXED_DATETIME = types.SimpleNamespace(datetime=FixedDatetime, date=FixedDate)


def fixed_import(name, *args, **kwargs):
    if name == "datetime":
        return FIXED_DATETIME
    return builtins.__import__(name, *args, **kwargs)


ENV_BUILTINS = dict(vars(builtins))
ENV_BUILTINS["__import__"] = fixed_import


def tag(v):
    """Type-exact JSON form of a Python value."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, list):
        return [tag(x) for x in v]
    if isinstance(v, tuple):
        return {"tuple": [tag(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[tag(k), tag(x)] for k, x in v.items()]}
    if isinstance(v, (set, frozenset)):
        return {"set": sorted((tag(x) for x in v), key=lambda t: json.dumps(t, sort_keys=True))}
    return {"other": type(v).__name__}


def evaluate(src, args):
    try:
        fn = eval(src, {"__builtins__": ENV_BUILTINS})
    except SyntaxError as e:
        return {"compile_error": "SyntaxError: %s" % e.msg}
    except Exception as e:  # e.g. a bare tuple whose later items name the parameter
        return {"compile_error": "%s: %s" % (type(e).__name__, e)}
    try:
        return {"result": tag(fn(*args))}
    except Exception as e:  # the lambda raised: ScienceBoard counts it as a failed check
        return {"error": "%s: %s" % (type(e).__name__, e)}


# ---------------------------------------------------------------- inputs

def entity(distance, visible=True, position=(0.0, 0.0, 0.0), hidden=False, marks=False):
    return {
        "distance": distance,
        "visible": visible,
        "hidden": hidden,
        "position": list(position),
        "mark": {k: marks for k in ("velocityVector", "planetographicGrid", "frameAxes", "sunDirection")},
    }


def celestia_dumps():
    """Dumps shaped like Celestia's /dump: time, config, entity."""
    far = {
        "Sol": entity(149597870.7, position=(0.0, 0.0, 0.0)),
        "Mercury": entity(91691000.0),
        "Venus": entity(41400000.0),
        "Earth": entity(6378.137, position=(-26499033.25, 132754033.5, 57544858.75)),
        "Moon": entity(384400.0, position=(-26700041.5, 132454023.0, 57444851.25)),
        "Mars": entity(78340000.0),
        "Jupiter": entity(628730000.0),
        "Callisto": entity(629900000.0),
        "Saturn": entity(1275000000.0),
        "Iapetus": entity(1278000000.0),
        "Uranus": entity(2723950000.0),
        "Neptune": entity(4351400000.0),
        "Pluto": entity(5906440628.0),
        "Orcus": entity(6541000000.0),
        "Dysnomia": entity(1.4e10),
        "Sirius A": entity(81370000000000.0),
        "Andromeda Galaxy": entity(2.4e19),
    }
    start = {
        "time": {"value": 2460676.5, "scale": 1, "pause": False},
        "config": {
            "render": {k: False for k in ("celestialSphere", "horizonGrid", "diagrams", "boundaries", "orbits", "ecliptic", "eclipticGrid")},
            "orbit": {"dwarfPlanet": False, "moon": True},
            "autoMagnitude": 6.5,
            "label": {"star": False, "openCluster": False},
            "starStyle": 0,
            "resolution": 1,
        },
        "entity": far,
    }
    goal = copy.deepcopy(start)
    goal["time"] = {"value": 2400000, "scale": 0.05, "pause": True}
    goal["config"]["render"] = {k: True for k in goal["config"]["render"]}
    goal["config"]["orbit"] = {"dwarfPlanet": True, "moon": False}
    goal["config"]["autoMagnitude"] = 9.0
    goal["config"]["label"] = {"star": True, "openCluster": True}
    goal["config"]["starStyle"] = 2
    goal["config"]["resolution"] = 2
    near = {"Neptune": 120000.5, "Orcus": 2500, "Dysnomia": 1800.25, "Sirius A": 1.2e8, "Andromeda Galaxy": 1.5e18,
            "Callisto": 12000.0, "Pluto": 6999.9, "Earth": 449999, "Iapetus": 4499.5}
    for name, d in near.items():
        goal["entity"][name]["distance"] = d
    for e in goal["entity"].values():
        e["mark"] = {k: True for k in e["mark"]}
    goal["entity"]["Mercury"]["hidden"] = True
    # A solar eclipse seen from Earth: the Moon almost on the Earth-Sun line.
    goal["entity"]["Earth"]["position"] = [-26499033.25, 132754033.5, 57544858.75]
    goal["entity"]["Moon"]["position"] = [-26431000.0, 132415000.0, 57397900.0]
    goal["entity"]["Sol"]["visible"] = False
    fast = copy.deepcopy(goal)
    fast["time"] = {"value": 2400000.0, "scale": 6.25, "pause": False}
    miss = copy.deepcopy(goal)
    miss["time"] = {"value": 2400000.1, "scale": 0.051, "pause": False}
    miss["config"]["autoMagnitude"] = 9.01
    far_again = {"Neptune": 150000, "Orcus": 3000.0, "Dysnomia": -3000.5, "Sirius A": 170000000,
                 "Andromeda Galaxy": 3.6e18, "Callisto": 15000, "Pluto": 7000.000001, "Earth": 450000.0, "Iapetus": 4500}
    for name, d in far_again.items():
        miss["entity"][name]["distance"] = d
    miss["entity"]["Moon"]["position"] = [-26700041.5, 132454023.0, 57444851.25]
    broken = copy.deepcopy(start)
    del broken["entity"]["Moon"]
    broken["time"]["value"] = "2400000"
    broken["config"]["render"] = None
    broken["entity"]["Neptune"]["distance"] = None
    return [("start", start), ("goal", goal), ("fast", fast), ("miss", miss), ("broken", broken)]


def param(name, value):
    return {"name": name, "value": value}


def grass_window(name, text, params):
    return {"name": name, "_text": text, "_data": [{"cmd": "d.vect"}, {"params": params}]}


def grass_dumps():
    """Dumps shaped like the GRASS GIS app-state server's /dump."""
    start = {
        "layers": [{"name": "natural_earth@PERMANENT", "opacity": 1.0, "type": "raster"}],
        "windows": [grass_window("natural_earth@PERMANENT", "natural_earth@PERMANENT", [param("map", "natural_earth@PERMANENT")])],
        "toolbars": {"shown": True, "keys": ["map", "misc", "nviz"], "layer": {"name": "natural_earth@PERMANENT"}},
        "statusbar": {"mode": 0, "scale": 106234567.25},
        "region": {"center_easting": 0.0, "center_northing": 0.0, "n": 90.0, "s": -90.0, "e": 180.0, "w": -180.0},
        "output": "",
    }
    boundary_params = [
        param("map", "boundary_region@PERMANENT"), param("display", "shape,cat,topo"),
        param("fill_color", "191:191:191:255"), param("attribute_column", "NOME"),
        param("font", "Ubuntu:Bold"), param("xref", "center"),
    ]
    goal = {
        "layers": [
            {"name": "countries@PERMANENT", "opacity": 0.5, "type": "vector"},
            {"name": "roadsmajor@PERMANENT", "opacity": 1.0, "type": "vector"},
        ],
        "windows": [
            grass_window("countries@PERMANENT", "country_boundaries", [param("map", "countries@PERMANENT")]),
            grass_window("boundary_region@PERMANENT", "boundary_region", boundary_params),
            grass_window("roadsmajor@PERMANENT", "roadsmajor", [param("color", "255:255:255:255")]),
            grass_window("railroads@PERMANENT", "railroads", [param("width", "2")]),
            grass_window("firestations@PERMANENT", "firestations", [param("icon", "basic/marker")]),
            grass_window("hospitals@PERMANENT", "hospitals", [param("size", "10")]),
            grass_window("schools@PERMANENT", "schools", [param("where", "wheelchair = 'yes'")]),
        ],
        "toolbars": {"shown": False, "keys": ["map", "vdigit"], "layer": {"name": "countries@PERMANENT"}},
        "statusbar": {"mode": 3, "scale": 400.04},
        "region": {"center_easting": 385.05, "center_northing": 20.0, "n": 44.25, "s": 41.2, "e": 28.75, "w": 22.3},
        "output": "v.info map=boundary_region@PERMANENT\n n: 263975\n",
    }
    miss = copy.deepcopy(goal)
    miss["layers"][0]["opacity"] = 0.52
    miss["layers"].insert(0, {"name": "natural_earth@PERMANENT", "opacity": 1, "type": "raster"})
    miss["windows"][0]["_text"] = "countries"
    for w in miss["windows"]:
        for p in w["_data"][1]["params"]:
            if p["name"] != "map":
                p["value"] = p["value"][:-1] if isinstance(p["value"], str) and p["value"] else p["value"]
    miss["windows"][-1]["_data"][1]["params"][0]["value"] = "wheelchair = 'no'"
    miss["toolbars"] = {"shown": True, "keys": ["map"], "layer": {"name": "natural_earth@PERMANENT"}}
    miss["statusbar"] = {"mode": 2, "scale": 25.1}
    miss["region"] = {"center_easting": -335, "center_northing": 19.89, "n": 43.5, "s": 41.5, "e": 28, "w": 23}
    miss["output"] = "g.region -p\nn: 26397"
    scale25 = copy.deepcopy(goal)
    scale25["statusbar"]["scale"] = 25
    scale25["region"] = {"center_easting": 25, "center_northing": 20, "n": 43.6, "s": 41.4, "e": 28.1, "w": 22.9}
    empty = {"layers": [], "windows": [], "toolbars": {"shown": True, "keys": [], "layer": None},
             "statusbar": {"mode": 0, "scale": None}, "region": {}, "output": None}
    return [("start", start), ("goal", goal), ("miss", miss), ("scale25", scale25), ("empty", empty)]


def grass_db_outputs():
    """Replies of the GRASS /gcmd endpoint's stdout (parsed JSON for format=json)."""
    cols = [{"name": "cat", "sql_type": "INTEGER", "is_number": True},
            {"name": "ISTAT", "sql_type": "DOUBLE PRECISION", "is_number": True},
            {"name": "NOME", "sql_type": "CHARACTER", "is_number": False}]
    before = {"info": {"columns": cols},
              "records": [{"cat": 1, "name": "Guglielmo Pepe", "start_date": "1858-03-12"},
                          {"cat": 2, "name": "Carlo Alberto", "start_date": "1831"}]}
    after = {"info": {"columns": [c for c in cols if c["name"] != "ISTAT"] + [{"name": "COLOR", "sql_type": "CHARACTER", "is_number": False}]},
             "records": [{"cat": 1, "name": "Guglielmo Pepe", "start_date": "1858"},
                         {"cat": 2, "name": "Carlo Alberto", "start_date": "1831"}]}
    wrong = {"info": {"columns": cols + [{"name": "COLOR", "sql_type": "INTEGER", "is_number": True}]},
             "records": [{"cat": 2, "name": "Carlo Alberto", "start_date": "1831"}]}
    text_ok = "cat|x|y|z\n257|-79.1050308691105|8.348947891274|0\n"
    text_bad = "cat|x|y|z\n256|15.5|38.2|0\n257|-79.1050308691105|8.348947891274|0\n"
    return [("before", before), ("after", after), ("wrong", wrong), ("text-ok", text_ok), ("text-bad", text_bad)]


def chimerax_states():
    """A flat state dump shaped like ChimeraX's states command output."""
    m = "_state_containers.models._models."
    return {
        m + "(1,)._name": "3ppd",
        m + "(1,)._nucleotide_info": "{}",
        m + "(1,)._nucleotide_changes": "[]",
        m + "(1,)._ring_drawing.name": "rings",
        m + "(1,).surfaces.(1, 1)._name": "3ppd_A SES surface",
        m + "(1,).surfaces.(1, 1)._vertex_colors": "[[ 79  79 255 255] [ 80  80 255 255]]",
        m + "(1, 1)._name": "hydrogen bonds",
        m + "(1, 1)._pbond_drawing.name": "pbonds",
        m + "(1, 1)._pbond_drawing._opaque_color_count": 12,
        m + "(1, 1)._pbond_drawing._colors": "[[139   0   0 255] [139   0   0 255]]",
        m + "(2,)._name": "centroid",
        m + "(2,)._atoms_drawing._positions._shift_and_scale": "[[13.0012  1.7766 21.3672  1.    ]]",
        m + "(3,)._name": "Color key",
        m + "(3,)._border": False,
        m + "(3,)._ticks": True,
        m + "(4,).drawing._name": "scalebar",
        m + "(4,).scalebar_width": 10.0,
        m + "(4,).scalebar_height": 4,
        m + "(5, 1)._name": "clashes",
        m + "(5, 2)._name": "contacts",
        "_state_containers.tools.log.page_source": "<html>termini: <br>61 hydrogens added, 4 clashes, 41 distances</html>",
        "_state_containers.main_view.camera.name": "mono",
        "_state_containers.main_view.background_color": [0, 0, 0, 1.0],
        "_state_containers.models._models.(6,)._name": None,
    }


# ---------------------------------------------------------------- cases

def task_lambdas(tasks_dir):
    """Every evaluate item of every task file, with its lambdas."""
    for path in sorted(glob.glob(os.path.join(tasks_dir, "*", "*", "*.json"))):
        with open(path, encoding="utf-8") as f:
            task = json.load(f)
        app = os.path.basename(os.path.dirname(path))
        tid = os.path.splitext(os.path.basename(path))[0]
        for i, item in enumerate(task.get("evaluate") or []):
            if not isinstance(item, dict):
                continue
            fields = {k: v for k, v in item.items() if isinstance(v, str) and v.lstrip().startswith("lambda")}
            if fields:
                yield app, tid, i, item, fields


def numeric_variants(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return []
    out = [v, float(v) + 0.05, float(v) - 0.05, v + 1, float(v) * 2 + 1000.5]
    if isinstance(v, float) and v == int(v):
        out.append(int(v))
    return out


def main():
    tasks_dir = sys.argv[1] if len(sys.argv) > 1 else TASKS
    out_file = sys.argv[2] if len(sys.argv) > 2 else OUT
    cases = []
    seen = {}

    shared = {}  # name -> the big inputs (state dumps), stored once
    refs = {}  # JSON text -> name

    def encode(arg, name):
        text = json.dumps(arg, ensure_ascii=False, allow_nan=False)
        if name is None or len(text) < 200:
            return {"json": arg}
        if text not in refs:
            refs[text] = name
            shared[name] = arg
        return {"ref": refs[text]}

    def add(name, src, args, ref=None):
        key = (src, json.dumps(args, sort_keys=False, allow_nan=False))
        if key in seen:
            return seen[key]
        r = evaluate(src, args)
        seen[key] = r
        case = {"name": name, "src": src, "args": [encode(a, ref) for a in args]}
        case.update(r)
        cases.append(case)
        return r

    dumps = {"Celestia": celestia_dumps(), "GrassGIS": grass_dumps()}
    db = grass_db_outputs()
    states = chimerax_states()
    coverage = {}
    for app, tid, i, item, fields in task_lambdas(tasks_dir):
        where = "%s/%s evaluate[%d]" % (app, tid, i)
        if app in ("Celestia", "GrassGIS"):
            key_src, pred_src = fields.get("key"), fields.get("pred")
            keys = []
            if key_src:
                inputs = db if item.get("type") == "db" else dumps[app]
                for dname, d in inputs:
                    r = add("%s key %s" % (where, dname), key_src, [d], ref="%s/%s" % ("GrassGIS-db" if item.get("type") == "db" else app, dname))
                    res = evaluate(key_src, [d])
                    if "result" in res:
                        keys.append(eval(key_src, {"__builtins__": ENV_BUILTINS})(d))
            if pred_src:
                value = item["value"]
                candidates = keys + numeric_variants(value) + [value]
                got = set()
                for n, k in enumerate(candidates):
                    r = add("%s pred #%d" % (where, n), pred_src, [k, value])
                    if r and "result" in r:
                        got.add(json.dumps(r["result"]))
                coverage[where + " pred"] = got
        elif app == "ChimeraX":
            key_src, find_src, value_src = fields.get("key"), fields.get("find"), fields.get("value")
            if find_src:
                matched = []
                got = set()
                for k, v in states.items():
                    r = add("%s find %s" % (where, k), find_src, [k, v])
                    if r and "result" in r:
                        got.add(json.dumps(r["result"]))
                        if r["result"] is True:
                            matched.append(k)
                coverage[where + " find"] = got
                if key_src:
                    for k in matched + list(states)[:3]:
                        add("%s key %s" % (where, k), key_src, [k])
            elif key_src:
                got = set()
                for k in states:
                    r = add("%s key %s" % (where, k), key_src, [k])
                    if r and "result" in r:
                        got.add(json.dumps(r["result"]))
                coverage[where + " key"] = got
            if value_src:
                add("%s value" % where, value_src, [])
        else:
            for f, src in fields.items():
                add("%s %s" % (where, f), src, [])

    for n, (src, arglists) in enumerate(EXTRAS):
        for m, args in enumerate(arglists):
            add("extra %d.%d" % (n, m), src, args)
    for n, src in enumerate(SYNTAX_ERRORS):
        add("syntax %d" % n, src, [])

    doc = {
        "generator": "tools/pylambda-golden/gen.py",
        "python": sys.version.split()[0],
        "now": NOW.isoformat(),
        "inputs": shared,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(out_file), exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as f:
        # One input and one case a line, so that a regeneration diffs well.
        dump = lambda v: json.dumps(v, ensure_ascii=False, allow_nan=False)
        f.write('{"generator": %s, "python": %s, "now": %s,\n"inputs": {\n' % (dump(doc["generator"]), dump(doc["python"]), dump(doc["now"])))
        f.write(",\n".join("%s: %s" % (dump(k), dump(v)) for k, v in shared.items()))
        f.write('\n},\n"cases": [\n')
        f.write(",\n".join(dump(c) for c in cases))
        f.write("\n]}\n")
    json.load(open(out_file, encoding="utf-8"))
    lacking = sorted(k for k, v in coverage.items() if not ("true" in v and "false" in v))
    print("%d cases written to %s (Python %s)" % (len(cases), out_file, doc["python"]))
    print("%d of %d predicates/finds/filters reach both True and False" % (len(coverage) - len(lacking), len(coverage)))
    for k in lacking:
        print("  only %s: %s" % (sorted(coverage[k]), k))


# Extra lambdas that exercise the translation and the builtins beyond what
# the task files use. Each has argument lists to call it with.
EXTRAS = [
    ("lambda x: x ** 2", [[3], [3.5], [-2], [0.1], [2 ** 40], [1e200]]),
    ("lambda x, y: x ** y", [[2, 10], [2, -1], [0, -1], [-8, 1 / 3], [2.0, 0.5], [1.1, 2.5], [10, 400.0], [-2.5, 3], [7, 0], [0.0, 0], [1.0001, 10000], [3, 1.5], [2, 1074.0], [2.0, -1075]]),
    ("lambda x: -x ** 2", [[3]]),
    ("lambda x: 2 ** -x", [[3]]),
    ("lambda x: 2 ** 3 ** x", [[2]]),
    ("lambda x: (-2) ** x", [[3], [4], [-1]]),
    ("lambda x: x['a'] ** 0.5 + x['b'][0] ** 2", [[{"a": 16, "b": [3]}]]),
    ("lambda x: 0 < x < 10", [[5], [10], [-1], [5.5]]),
    ("lambda x, v: v[0] < x['opacity'] < v[1]", [[{"opacity": 0.5}, [0.48, 0.52]], [{"opacity": 0.52}, [0.48, 0.52]]]),
    ("lambda x: 1 < x[0] <= x[1] < 10 != x[2]", [[[2, 3, 4]], [[2, 3, 10]], [[3, 2, 4]]]),
    ("lambda x: x is None", [[None], [0], [False]]),
    ("lambda x: x is not None and x is not False", [[None], [0], [False], [True]]),
    ("lambda x: x is True", [[True], [1]]),
    ("lambda k, v: any(item['name'] == v for item in k)", [[[{"name": "a"}, {"name": "b"}], "b"], [[], "b"]]),
    ("lambda k: all(x > 0 for x in k)", [[[1, 2]], [[1, -2]], [[]]]),
    ("lambda k: sum(x['n'] for x in k)", [[[{"n": 1}, {"n": 2.5}]], [[{"n": 1}, {"n": 2}]]]),
    ("lambda k: sum(k)", [[[0.1] * 10], [[1, 2, 3]], [[True, True, 1]], [[1e16, 1.0, -1e16]], [[]]]),
    ("lambda k, s: sum(k, s)", [[[[1], [2]], []], [[1.5, 2], 10]]),
    ("lambda x: round(x)", [[2.5], [3.5], [-2.5], [0.49999999999999994], [7], [1e300]]),
    ("lambda x, n: round(x, n)", [[2.675, 2], [0.125, 2], [0.375, 2], [-0.001, 2], [1234.5678, -2], [1250, -2], [1350, -2], [-1250, -2], [5e-324, 400], [1.5e308, -308], [123.456, 0], [0.5, 0], [1.23456789e-5, 7]]),
    ("lambda x: max(v for v in x)", [[[3, 1, 2]], [[1.5, 2]]]),
    ("lambda x: min(x, key=lambda d: d['k'])", [[[{"k": 2}, {"k": 1}]]]),
    ("lambda x: float('nan') != x", [[1.0]]),
    ("lambda x: float('inf') > x", [[1e308]]),
    ("lambda x: x % 360", [[385.05], [-335], [-335.5], [720], [-720.0], [0.1]]),
    ("lambda x, y: x // y", [[7, 2], [-7, 2], [7.5, 2], [-7.5, 2]]),
    ("lambda x, y: divmod(x, y)", [[7, 2], [-7, 2], [7.5, 2], [1, 0.1], [-1.5, 0.5]]),
    ("lambda x: abs(x - 0.1) < 1e-9", [[0.1], [0.30000000000000004]]),
    ("lambda x: __import__('math').sqrt(x)", [[2], [2.0], [1e-300], [0]]),
    ("lambda x: __import__('math').sqrt(x)", [[-1]]),
    ("lambda x: __import__('math').floor(x) + __import__('math').ceil(x)", [[2.5], [-2.5], [3]]),
    ("lambda x: __import__('math').degrees(x) + __import__('math').radians(x)", [[1], [0.5], [3.141592653589793]]),
    ("lambda x: __import__('math').isclose(x, 1.0, rel_tol=1e-3)", [[1.0005], [1.01]]),
    ("lambda x: __import__('math').log(x) + __import__('math').exp(1) + __import__('math').pi", [[10]]),
    ("lambda x: __import__('math').hypot(x, 4)", [[3]]),
    ("lambda: __import__('datetime').datetime.today().strftime('%Y-%m-%d %H:%M:%S %j %a %A %b %B %p %I %y %f %%')", [[]]),
    ("lambda: __import__('datetime').date.today().isoformat()", [[]]),
    ("lambda: __import__('datetime').datetime.now().year", [[]]),
    ("lambda x: (y := x * 2, z := y + 1, [y, z])[-1]", [[3]]),
    ("lambda x: [y := x, y ** 2]", [[4]]),
    ("lambda xs: [t for x in xs if (t := x * 2) > 2]", [[[1, 2, 3]]]),
    ("lambda x: (x := x + 1, x)", [[1]]),
    ("lambda x: {x, 1, 2}", [[2], [3]]),
    ("lambda x: {v % 3 for v in x}", [[[1, 2, 3, 4]]]),
    ("lambda x: {k: v for k, v in x.items() if v}", [[{"a": 1, "b": 0, "c": [1]}]]),
    ("lambda x: {'a': 1, 'b': x, 'a': 3}", [[2]]),
    ("lambda x: [(a, b) for a, b in x]", [[[[1, 2], [3, 4]]]]),
    ("lambda x: [a + b for (a, (b, c)) in x]", [[[[1, [2, 3]]]]]),
    ("lambda x: x['k'] if 'k' in x else None", [[{"k": 1}], [{"j": 2}]]),
    ("lambda x: x.get('a', 'none')", [[{"a": 0}], [{}]]),
    ("lambda x: sorted(x, key=lambda d: -d['v'], reverse=True)", [[[{"v": 2}, {"v": 1}, {"v": 3}]]]),
    ("lambda x: list(map(lambda v: v * 2, x))", [[[1, 2.5]]]),
    ("lambda x: list(filter(None, x))", [[[0, 1, "", "a", None, [], [0]]]]),
    ("lambda x: len(list(filter(lambda v: v > 1, x)))", [[[0, 1, 2, 3]]]),
    ("lambda x: isinstance(x, int)", [[1], [True], [1.0], ["1"]]),
    ("lambda x: isinstance(x, (list, tuple)) and not isinstance(x, str)", [[[1]], ["ab"]]),
    ("lambda x: type(x) == float", [[1.0], [1]]),
    ("lambda x: type(x) is dict", [[{}], [[]]]),
    ("lambda x: pow(x, 2) + pow(x, 3, 5)", [[4]]),
    ("lambda x: '{} {:.2f} {:>5}'.format(x[0], x[1], x[2])", [[["a", 1.005, "b"]]]),
    ("lambda x: '%s=%d' % (x['k'], x['v'])", [[{"k": "n", "v": 7}]]),
    ("lambda x: x.strip().split('|')", [["  a|b|c \n"]]),
    ("lambda x: x.lower().replace(' ', '_').startswith(('a', 'b'))", [["A Cat"], ["c at"]]),
    ("lambda x: x[::-1]", [[[1, 2, 3, 4]], ["abc"]]),
    ("lambda x: [i for i, v in enumerate(x) if v]", [[[0, 1, 0, 2]]]),
    ("lambda x: dict(zip(x, range(len(x))))", [[["a", "b"]]]),
    ("lambda x: 'wheel' in x and not 'no' in x", [["wheelchair = 'yes'"], ["wheelchair = 'no'"]]),
    ("lambda x: int(x) + float(x)", [["12"], [3.7]]),
    ("lambda x: str(x)", [[1], [1.5], [True], [None], ["s"]]),
    ("lambda x: x and x[0]", [[[]], [[0]]]),
    ("lambda x: not x or x", [[0], [2]]),
    ("lambda x: x + 1 if x > 0 else x - 1 if x < 0 else 0", [[1], [-1], [0]]),
    ("lambda x: 1 if x else 0", [[[]], [{}], [""], [0.0], [None], [[0]]]),
    ("lambda *a: len(a)", [[], [1, 2]]),
    ("lambda a, b=2: a * b", [[3], [3, 4]]),
    ("lambda a, *rest, **kw: (a, rest)", [[1, 2, 3]]),
    ("lambda x: x * 2", [["ab"], [[1]], [0.5]]),
    ("lambda x: [1, 2] + x", [[[3]]]),
    ("lambda x: x ^ 5 | 2 & x << 1 >> 1", [[3]]),
    ("lambda x: ~x", [[5]]),
    ("lambda x: 1_000 + 0x1F + 0o17 + 0b101 + 1e3 + .5 + 5. + x", [[0]]),
    ("lambda x: 'a' 'b' \"c\" + x", [["d"]]),
    ("lambda x: '\\x41\\u00e9\\t' + r'\\d' + '\\d' + x", [["!"]]),
    ("lambda x: (x\n  + 1)", [[1]]),
    ("lambda x: x  # comment", [[1]]),
    ("lambda x: x[0]", [[[]], [{}], [None]]),
    ("lambda x: x['a']", [[{"b": 1}], [[1]]]),
    ("lambda x: x + 1", [["a"], [None]]),
    ("lambda x: x > 1", [["a"], [None], [[1]]]),
    ("lambda x: 1 / x", [[0], [0.0], [4]]),
    ("lambda x: x == 1.0 and x == 1 and 1 == True", [[1], [1.0], [True]]),
    ("lambda x: [x == y for y in (1, 1.0, '1', [1], None)]", [[1], [1.0]]),
    ("lambda x: x in [1, 2] and x not in {'a': 1}", [[1], [1.0], [3]]),
    ("lambda d: list(d.keys()) + list(d.values())", [[{"b": 1, "a": 2}]]),
    ("lambda d: [k for k in d]", [[{"z": 1, "a": 2, "m": 3}]]),
    ("lambda x: max(1, x, 2.5)", [[3], [0]]),
    ("lambda x: hash('abc') != 0 and len(dir(x)) > 0", [[[]]]),
    ("lambda x: getattr(x, 'upper')() + ('Y' if hasattr(x, 'lower') else 'N')", [["a"]]),
    ("lambda x: chr(ord(x) + 1)", [["a"]]),
    ("lambda x: tuple(x) + (1,)", [[[0]]]),
    ("lambda x: set(x) == {1, 2}", [[[1, 2, 2]], [[1]]]),
    ("lambda x: reversed(x)", [[[1, 2]]]),
    ("lambda x: list(reversed(x))", [[[1, 2]]]),
    ("lambda x: [*x]", [[[1]]]),
    ("lambda load: load + 1", [[1]]),
    ("lambda x: (lambda y: x + y)(1)", [[1]]),
    ("lambda x: [(lambda: v)() for v in x]", [[[1, 2]]]),
    ("lambda x: x.__class__", [[1]]),
]

# Sources that CPython refuses to compile.
SYNTAX_ERRORS = [
    "lambda x: x +",
    "lambda x: (x",
    "lambda x, x: x",
    "lambda x: x := 1",
    "lambda x: 'abc",
    "lambda x: 01",
    "lambda x=1, y: x",
    "lambda x: f(x for x in x, 1)",
    "lambda x: [y for y in (z := x)]",
    "lambda x: [x := 1 for x in x]",
    "lambda x: x\n+ 1",
    "lambda x: x if x",
    "lambda x: x $ 1",
    "lambda: yield",
    "lambda x: f(a=1, 2)",
    "lambda *: 0",
    "lambda x: 1__0",
    "lambda x: x[::-1], x[1:3], x[-1]",
]

if __name__ == "__main__":
    main()
