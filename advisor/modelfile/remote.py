"""Remote model references, read as metadata only: Hugging Face repos, GGUF URLs, the Ollama library.

| reference | what is read |
| --- | --- |
| `ORG/NAME`, `hf:ORG/NAME`, `https://huggingface.co/ORG/NAME` (`@REV` optional) | the repo's listing (the Hub API), `config.json`, the safetensors index and every shard's header |
| `ORG/NAME-GGUF:TAG` (`UD-Q4_K_XL`, `Q4_K_M`, ...) or a `.../resolve/REV/FILE.gguf` URL | the listing, then the header of that GGUF file (every part of a split set) and of the mmproj `llama-server -hf` fetches beside it (`pick_mmproj`) |
| a GGUF repo without a tag | nothing more: its GGUF files are listed with their sizes, to pick one |
| `https://HOST/.../FILE.gguf` | that file's header (split sets: every part's) |
| `ollama:NAME[:TAG]`, or `NAME:TAG` | the local Ollama store when it has the model, else the library's manifest (registry.ollama.ai, or `$ADVISOR_OLLAMA_REGISTRY`) and the GGUF blob's header (and the projector layer's) |

Headers are parsed by the same bounded readers as local files (`gguf_file`, `safetensors_file`),
fed by range requests (`fetch.RangeFile`); bounds, timeouts and the cache are `fetch`'s.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

from advisor.engine.loaded import LoadedModel
from advisor.errors import AdvisorError
from advisor.modelfile import fetch, limits
from advisor.modelfile.fetch import Progress, RemoteError, Source

HF_DEFAULT = "https://huggingface.co"
OLLAMA_DEFAULT = "https://registry.ollama.ai"
OLLAMA_ENV = "ADVISOR_OLLAMA_REGISTRY"
OLLAMA_MODEL = "application/vnd.ollama.image.model"
OLLAMA_PROJECTOR = "application/vnd.ollama.image.projector"
"""The vision projector layer (an mmproj GGUF) Ollama loads with the model (ollama/ollama server/images.go
ProjectorPaths, llm/server.go: the first one is passed to the runner as --mmproj)."""

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_HF = re.compile(rf"^(?P<repo>{_NAME}/{_NAME})(?:@(?P<rev>[A-Za-z0-9._/-]{{1,200}}?))?(?::(?P<tag>[A-Za-z0-9._-]{{1,64}}))?$")
_OLLAMA = re.compile(r"^(?P<name>[a-z0-9][a-z0-9._-]{0,95}(?:/[a-z0-9][a-z0-9._-]{0,95}){0,2}):(?P<tag>[A-Za-z0-9._-]{1,128})$")
_OLLAMA_PREFIXED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,95}){0,2})"
                              r"(?::(?P<tag>[A-Za-z0-9._-]{1,128}))?$")
_SPLIT = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")
_QUANT_TAG = re.compile(r"(?:^|[-_.])((?:UD-)?(?:I?Q\d(?:_[0-9A-Z]+)*|BF16|F16|F32|FP16|MXFP4(?:_MOE)?|TQ\d_\d))$",
                        re.IGNORECASE)


@dataclass(frozen=True)
class Ref:
    """A parsed remote reference."""

    kind: str
    """`hf` (a Hub repo, maybe one file or tag), `url` (a GGUF file anywhere) or `ollama`."""
    text: str
    repo: str = ""
    revision: str = ""
    tag: str = ""
    filename: str = ""
    url: str = ""
    name: str = ""
    """Ollama: NAME (library) or NAMESPACE/NAME."""


def parse_ref(text: str, *, plain_ok: bool = True) -> Ref | None:
    """The remote reference `text` writes, or None when it is not one. `plain_ok`: also the forms
    without a prefix (`ORG/NAME[:TAG]`, `NAME:TAG`), which the caller tries after paths and the catalog."""
    if text.startswith("hf:"):
        m = _HF.match(text[3:])
        if not m:
            raise AdvisorError(f"{text[:200]!r} is not a Hugging Face model id", "write hf:ORG/NAME, e.g. hf:Qwen/Qwen3-8B")
        return Ref("hf", text, repo=m["repo"], revision=m["rev"] or "", tag=m["tag"] or "")
    if text.startswith("ollama:"):
        m = _OLLAMA_PREFIXED.match(text[7:])
        if not m:
            raise AdvisorError(f"{text[:200]!r} is not a model name", "write ollama:NAME[:TAG], e.g. ollama:llama3.1:70b")
        return Ref("ollama", text, name=m["name"], tag=m["tag"] or "latest")
    if text.startswith(("https://", "http://")):
        return _parse_url(text)
    if not plain_ok:
        return None
    m = _HF.match(text)
    if m and not text.endswith((".gguf", ".json", ".safetensors")):
        return Ref("hf", text, repo=m["repo"], revision=m["rev"] or "", tag=m["tag"] or "")
    m = _OLLAMA.match(text)
    if m:
        return Ref("ollama", text, name=m["name"], tag=m["tag"])
    return None


def _parse_url(text: str) -> Ref:
    parts = urlsplit(text)
    if not parts.netloc:
        raise AdvisorError(f"{text[:200]!r} is not a URL", "write https://HOST/PATH/FILE.gguf")
    hf_hosts = {urlsplit(HF_DEFAULT).netloc, urlsplit(hf_endpoint()).netloc}
    path = unquote(parts.path)
    if parts.netloc in hf_hosts:
        segs = [s for s in path.split("/") if s]
        plain_file = len(segs) == 2 and segs[1].lower().endswith(".gguf")
        if len(segs) >= 2 and segs[0] not in ("api", "datasets", "spaces") and not plain_file:
            repo = f"{segs[0]}/{segs[1]}"
            if len(segs) >= 5 and segs[2] in ("resolve", "blob"):
                return Ref("hf", text, repo=repo, revision=segs[3], filename="/".join(segs[4:]))
            if len(segs) >= 4 and segs[2] == "tree":
                return Ref("hf", text, repo=repo, revision="/".join(segs[3:]))
            if len(segs) == 2:
                return Ref("hf", text, repo=repo)
    if not path.lower().endswith(".gguf"):
        raise AdvisorError(f"{text[:200]!r}: only .gguf files and Hugging Face repos can be read from a URL",
                           "give the URL of a .gguf file, or ORG/NAME for a Hugging Face repo")
    return Ref("url", text, url=text)


def hf_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or HF_DEFAULT).rstrip("/")


def _hf_offline() -> str:
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return "HF_HUB_OFFLINE is set" if value.strip().upper() in ("1", "ON", "YES", "TRUE") else ""


# --- entry point -------------------------------------------------------------------------------

def read_remote(ref: Ref, progress: Progress | None = None, *, mmproj: bool = True) -> LoadedModel:
    """The model a remote reference names, from its metadata (cached after the first read).

    `mmproj`: also read the vision projector the runtime would fetch with the model (a GGUF repo's
    `mmproj-*.gguf`, as `llama-server -hf` picks it; an Ollama manifest's projector layer). False
    (`--no-mmproj`, or an mmproj file given by the user): no request is made for it."""
    if ref.kind == "hf":
        return _read_hf(ref, progress, mmproj)
    if ref.kind == "url":
        from dataclasses import replace

        key = fetch.record_key("url", ref.url)
        return replace(fetch.run(key, ref.text, lambda src: _gguf_from_url(src, ref), progress=progress), url=ref.url)
    return _read_ollama(ref, progress, mmproj)


# --- Hugging Face ------------------------------------------------------------------------------

def _hub():
    """huggingface_hub, imported with its telemetry off: its user-agent code would otherwise fetch
    `/api/agent-harnesses` from the endpoint, a request nobody asked for (and up to 3 s offline)."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import huggingface_hub
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_TELEMETRY = True
    return huggingface_hub


def _hf_headers() -> dict[str, str]:
    _hub()
    from huggingface_hub.utils import build_hf_headers

    headers = build_hf_headers(library_name="advisor")  # the token: HF_TOKEN, else the saved login
    return {k.lower(): v for k, v in headers.items()}


def _read_hf(ref: Ref, progress: Progress | None, mmproj: bool = True) -> LoadedModel:
    endpoint = hf_endpoint()
    key = fetch.record_key("hf", endpoint, ref.repo, ref.revision, ref.tag, ref.filename)
    return fetch.run(key, ref.text, lambda src: _hf_model(src, ref, endpoint, mmproj), headers=_hf_headers(),
                     offline=_hf_offline(), progress=progress)


def _gated_hint(repo: str, endpoint: str) -> str:
    if os.environ.get("HF_TOKEN"):
        return f"{repo} is gated or private and this HF_TOKEN has no access: accept its terms at {endpoint}/{repo} " \
               "with the token's account"
    return f"{repo} may be gated or private: accept its terms at {endpoint}/{repo}, then set HF_TOKEN to a token of that account"


def _hf_listing(src: Source, ref: Ref, endpoint: str) -> dict[str, Any]:
    """The repo's files and commit, as `GET /api/models/ORG/NAME[/revision/REV]?blobs=true` answers
    (huggingface_hub's model_info URL), read here so the answer is bounded in bytes and items before
    it is parsed and every field is checked before it is used."""
    def fetch_listing() -> dict[str, Any]:
        rev = f"/revision/{quote(ref.revision, safe='')}" if ref.revision else ""
        url = f"{endpoint}/api/models/{ref.repo}{rev}?blobs=true"
        raw = fetch.get_small(url, limits.MAX_LISTING_JSON, f"{ref.repo} listing", src.headers,
                              on_status=lambda status, headers: _listing_error(status, headers, url, ref, endpoint, src))
        return _listing_fields(fetch.json_from(raw, url, f"{ref.repo} listing", limits.MAX_LISTING_JSON), ref)

    return src.json("listing", fetch_listing)


def _listing_error(status: int, headers: Any, url: str, ref: Ref, endpoint: str, src: Source) -> RemoteError:
    """An error answer to the listing, read as huggingface_hub reads it (hf_raise_for_status)."""
    _hub()
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.utils import hf_raise_for_status

    httpx = fetch.httpx_module()
    host, what = urlsplit(endpoint).netloc, ref.repo
    try:
        hf_raise_for_status(httpx.Response(status, headers=headers, content=b"", request=httpx.Request("GET", url)))
    except GatedRepoError:
        return RemoteError(f"{what}: {host} refused access (gated)", _gated_hint(ref.repo, endpoint))
    except RevisionNotFoundError:
        return RemoteError(f"{what}: no revision {ref.revision!r} on {host} (404)", "use a branch, tag or commit the repo has")
    except RepositoryNotFoundError:
        code = (headers or {}).get("x-error-code", "")
        if status in (401, 403) and code != "RepoNotFound":
            return RemoteError(f"{what}: {host} answered {status} (gated or private)", _gated_hint(ref.repo, endpoint))
        private = " (or it is private: then set HF_TOKEN)" if status == 401 and not os.environ.get("HF_TOKEN") else ""
        return RemoteError(f"{what}: no such model on {host}{private}", _closest_repos(endpoint, ref.repo, src))
    except HfHubHTTPError:
        if status in (401, 403):
            return RemoteError(f"{what}: {host} answered {status} (gated or private)", _gated_hint(ref.repo, endpoint))
        if status == 404:
            return RemoteError(f"{what}: no such model on {host}", _closest_repos(endpoint, ref.repo, src))
    return fetch.status_error(status, what, endpoint, headers, gated_hint="x")


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
"""A git commit id as the Hub gives it (SHA-1; SHA-256 for repos in git's newer object format)."""


def _listing_fields(doc: Any, ref: Ref) -> dict[str, Any]:
    """{"sha": commit, "files": [[path, size or None], ...]} from a listing, each field checked:
    a listing that is not the Hub's shape is one line, never a TypeError further on."""
    def bad(why: str) -> RemoteError:
        return RemoteError(f"{ref.repo}: the Hub's listing {why}", "the endpoint did not answer as the Hub does (HF_ENDPOINT?)")

    if not isinstance(doc, dict):
        raise bad("is not a JSON object")
    sha = doc.get("sha")
    if sha is not None and not (isinstance(sha, str) and _SHA.fullmatch(sha)):
        raise bad(f"names its commit {str(sha)[:60]!r}, not a commit id")
    siblings = doc.get("siblings") or []
    if not isinstance(siblings, list):
        raise bad("has no list of files (siblings)")
    if len(siblings) > limits.MAX_LISTING_FILES:
        raise bad(f"lists {len(siblings)} files (over {limits.MAX_LISTING_FILES}): not a model repository read here")
    files = []
    for s in siblings:
        name = s.get("rfilename") if isinstance(s, dict) else None
        if not isinstance(name, str) or not _repo_path(name):
            raise bad(f"lists a file named {str(name)[:80]!r}")
        lfs = s.get("lfs")
        size = lfs.get("size") if isinstance(lfs, dict) and lfs.get("size") is not None else s.get("size")
        if size is not None and (type(size) is not int or not 0 <= size <= limits.MAX_FILE_BYTES):
            raise bad(f"gives {name[:80]!r} the size {str(size)[:40]!r}")
        files.append([name, size])
    return {"sha": sha or ref.revision or "main", "files": files}


def _repo_path(name: str) -> bool:
    """A file path inside a repo: no empty, `.` or `..` segment, no control character."""
    return 0 < len(name) <= 1000 and name.isprintable() and all(seg not in ("", ".", "..") for seg in name.split("/"))


def _closest_repos(endpoint: str, repo: str, src: Source) -> str:
    """Names like `repo` that the Hub has, for a 404: one search page, then (when it is empty) one
    page of the owner's models; never a page chain (`Link: next`), each answer bounded."""
    name, owner = repo.split("/")[-1], repo.split("/")[0]
    found = _model_ids(f"{endpoint}/api/models?{urlencode({'search': name[:60], 'limit': 5})}", src)
    if not found:
        import difflib

        owned = _model_ids(f"{endpoint}/api/models?{urlencode({'author': owner, 'limit': 200})}", src)
        found = difflib.get_close_matches(repo, owned, n=5, cutoff=0.5)
    return f"closest on the Hub: {', '.join(found[:5])}" if found else "check the spelling: ORG/NAME as on the model's page"


def _model_ids(url: str, src: Source) -> list[str]:
    """The `id`s of one page of a Hub model search (the hint is a courtesy: a failure is no names)."""
    try:
        raw = fetch.get_small(url, limits.MAX_SEARCH_JSON, "search", src.headers)
        doc = fetch.json_from(raw, url, "search", limits.MAX_SEARCH_JSON)
    except AdvisorError:
        return []
    items = doc if isinstance(doc, list) else []
    return [m["id"] for m in items[:200] if isinstance(m, dict) and isinstance(m.get("id"), str) and _HF.match(m["id"])]


def _hf_model(src: Source, ref: Ref, endpoint: str, mmproj: bool = True) -> LoadedModel:
    listing = _hf_listing(src, ref, endpoint)
    sha = listing["sha"]
    sizes = {name: size for name, size in listing["files"]}
    url = lambda name: f"{endpoint}/{ref.repo}/resolve/{quote(sha, safe='')}/{quote(name)}"  # noqa: E731
    on_status = lambda what: (lambda status, headers: fetch.status_error(  # noqa: E731
        status, what, endpoint, headers, gated_hint=_gated_hint(ref.repo, endpoint)))
    where = f"{ref.repo}@{sha[:12]}"
    sources = (f"{endpoint}/{ref.repo}/tree/{sha}",)
    if ref.filename:
        if ref.filename not in sizes:
            raise RemoteError(f"{ref.repo}: no file {ref.filename!r} at {sha[:12]}", _gguf_listing_hint(ref.repo, sizes))
        if not ref.filename.endswith(".gguf"):
            raise RemoteError(f"{ref.repo}/{ref.filename}: only a .gguf file can be read by itself",
                              f"give the repo ({ref.repo}) for a safetensors model")
        names = _split_names(ref.filename, sizes, ref.repo)
        model = _gguf_parts(src, ref.repo, names, sizes, url, on_status, name=f"{ref.repo}/{ref.filename}",
                            source="hf remote", sources=sources)
        model = _with_mmproj(src, model, ref.repo, names[0], sizes, url, on_status, mmproj)
        return _by_repo(model, ref.repo, ref.filename)
    ggufs = _gguf_models(sizes)
    if ref.tag:
        if not ggufs:
            raise RemoteError(f"{ref.repo}: :{ref.tag} picks a GGUF file, and this repo has none",
                              f"ask for {ref.repo} itself (its safetensors) or its -GGUF repo")
        names = _pick_tag(ggufs, ref.tag, ref.repo, sizes)
        model = _gguf_parts(src, ref.repo, names, sizes, url, on_status, name=f"{ref.repo}:{ref.tag}",
                            source="hf remote", sources=sources, quant_id=_tag_of(names[0]) or ref.tag)
        model = _with_mmproj(src, model, ref.repo, names[0], sizes, url, on_status, mmproj)
        return _by_repo(model, f"{ref.repo}:{ref.tag}", "")
    weights = [n for n in sizes if n.endswith(".safetensors") and "/" not in n]
    if "config.json" in sizes and (weights or not ggufs):
        cfg = src.get_json("config.json", url("config.json"), limits.MAX_SMALL_JSON, f"{ref.repo} config.json",
                           on_status=on_status(f"{ref.repo} config.json"))
        if not weights:
            return _config_only(cfg, ref.repo, where, sources)
        groups = _safetensors_groups(src, ref.repo, sizes, weights, url, on_status)
        from advisor.modelfile.build import from_safetensors

        return from_safetensors(cfg, Path(f"{where}/config.json"), groups, Path(where), name=ref.repo,
                                source="hf remote", sources=sources)
    if len(ggufs) == 1:
        names = next(iter(ggufs.values()))
        model = _gguf_parts(src, ref.repo, names, sizes, url, on_status, name=ref.repo, source="hf remote",
                            sources=sources, quant_id=_tag_of(names[0]))
        model = _with_mmproj(src, model, ref.repo, names[0], sizes, url, on_status, mmproj)
        return _by_repo(model, ref.repo, names[0])
    if ggufs:
        raise RemoteError(f"{ref.repo} holds {len(ggufs)} GGUF models: pick one as {ref.repo}:TAG",
                          _gguf_listing_hint(ref.repo, sizes))
    raise RemoteError(f"{ref.repo}: no config.json, safetensors or GGUF files at {sha[:12]}",
                      "this is not a model repository the advisor can read")


def _config_only(cfg: Any, repo: str, where: str, sources: tuple[str, ...]) -> LoadedModel:
    """config.json alone (a repo without weights in a format read here): the architecture, BF16 assumed."""
    from advisor.catalog.types import QuantSpec
    from advisor.engine.memory import weights_layout
    from advisor.modelfile import hf_config
    from advisor.catalog.types import ModelSpec
    from advisor.modelfile.build import ST_RUNTIMES
    from advisor.modelfile.fields import family_of, slug

    cfg_where = Path(f"{where}/config.json")
    model_type, f, notes = hf_config.architecture(cfg, cfg_where)
    total, active = hf_config.estimate_params(cfg, f, cfg_where)
    spec = ModelSpec(id=slug(repo.split("/")[-1]), name=repo, family=family_of(model_type), params_total=total,
                     params_active=active, sources=sources,
                     notes="; ".join([f"architecture from {repo}'s config.json (model_type {model_type}); "
                                      "no safetensors weights: parameters counted from its shapes", *notes]), **f)
    quant = QuantSpec(id="BF16", format="safetensors", bits_per_weight=16.0,
                      bpw_basis="estimate: parameters counted from config.json shapes, stored at 16 bits (BF16)",
                      runtimes=ST_RUNTIMES, kernel="f16")
    return LoadedModel(spec=spec, quant=quant, layout=weights_layout(spec, quant), source="hf remote", exact=False)


def _safetensors_groups(src: Source, repo: str, sizes: dict[str, Any], weights: list[str], url, on_status):
    from advisor.modelfile.safetensors_file import read_safetensors_stream

    shards: dict[str, set[str] | None]
    if "model.safetensors.index.json" in sizes:
        index = src.get_json("model.safetensors.index.json", url("model.safetensors.index.json"), limits.MAX_INDEX_JSON,
                             f"{repo} safetensors index", on_status=on_status(f"{repo} safetensors index"))
        from advisor.modelfile.safetensors_file import index_shards

        shards = dict(index_shards(index, f"{repo}/model.safetensors.index.json"))
        absent = [fname for fname in shards if fname not in sizes]
        if absent:
            raise RemoteError(f"{repo}: the index names {absent[0][:100]!r}, which the repo does not have",
                              "the upload is incomplete")
    else:
        picked = [n for n in weights if not n.startswith("consolidated")] or weights
        shards = {n: None for n in sorted(picked)}
    if len(shards) > limits.MAX_SPLITS:
        raise RemoteError(f"{repo}: {len(shards)} safetensors shards (over {limits.MAX_SPLITS})", "")

    def one(fname: str):
        what = f"{repo}/{fname}"
        with src.open(url(fname), what, sizes.get(fname), on_status(what)) as f:
            tensors, _meta = read_safetensors_stream(f, f.size, what)
        src.done(f)
        names = shards[fname]
        if names is not None:
            lost = names - {t.name for t in tensors}
            if lost:
                raise RemoteError(f"{what}: the index puts {len(lost)} tensors here that the file lacks", "the repo is malformed")
        return tensors

    order = list(shards)
    if len(order) <= 1 or not src.live:
        return [one(n) for n in order]
    with ThreadPoolExecutor(max_workers=min(8, len(order)), thread_name_prefix="advisor-shard") as pool:
        return list(pool.map(one, order))


# --- GGUF files in a repo, by tag ------------------------------------------------------------------

def _tag_of(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    m = _SPLIT.match(base)
    stem = m["stem"] if m else base.removesuffix(".gguf")
    t = _QUANT_TAG.search(stem)
    return t.group(1).upper().replace("UD-", "UD-") if t else ""


def _gguf_models(sizes: dict[str, Any]) -> dict[str, list[str]]:
    """GGUF models in a listing, by the name of their first file: [first, part 2, ...] (mmproj files left out)."""
    out: dict[str, list[str]] = {}
    for name in sorted(sizes):
        base = name.rsplit("/", 1)[-1]
        if not base.endswith(".gguf") or "mmproj" in base.lower():
            continue
        m = _SPLIT.match(base)
        if m and m["i"] != "00001":
            continue
        out[name] = _split_names(name, sizes, "") if m else [name]
    return out


def _split_names(name: str, sizes: dict[str, Any], repo: str) -> list[str]:
    folder, _, base = name.rpartition("/")
    m = _SPLIT.match(base)
    if not m:
        return [name]
    n = int(m["n"])
    if not 1 <= n <= limits.MAX_SPLITS:
        raise RemoteError(f"{name}: split name says {n} parts", "")
    names = [f"{folder + '/' if folder else ''}{m['stem']}-{k:05d}-of-{n:05d}.gguf" for k in range(1, n + 1)]
    missing = [p for p in names if p not in sizes]
    if missing and repo:
        raise RemoteError(f"{repo}: split GGUF {base} is missing {len(missing)} of its {n} parts", "the upload is incomplete")
    return [p for p in names if p in sizes] if not repo else names


def _pick_tag(ggufs: dict[str, list[str]], tag: str, repo: str, sizes: dict[str, Any]) -> list[str]:
    want = tag.upper()
    hits = [names for first, names in ggufs.items() if _tag_of(first) == want]
    if not hits:
        hits = [names for first, names in ggufs.items()
                if first.upper().removesuffix(".GGUF").endswith(want) or first.upper().split("/")[0] == want]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise RemoteError(f"{repo}:{tag} matches {len(hits)} files ({', '.join(h[0] for h in hits[:4])})",
                          "give the file's URL (.../resolve/main/FILE.gguf) instead")
    raise RemoteError(f"{repo}: no GGUF file tagged {tag}", _gguf_listing_hint(repo, sizes, tag))


def _gguf_listing_hint(repo: str, sizes: dict[str, Any], near: str = "") -> str:
    ggufs = _gguf_models(sizes)
    if not ggufs:
        return f"{repo} has no GGUF files"
    rows = []
    for first, names in ggufs.items():
        total = sum(sizes.get(n) or 0 for n in names)
        tag = _tag_of(first) or first
        rows.append((tag, total, len(names)))
    if near:
        import difflib

        close = difflib.get_close_matches(near.upper(), [r[0] for r in rows], n=3, cutoff=0.4)
        rows.sort(key=lambda r: (r[0] not in close, close.index(r[0]) if r[0] in close else 0, r[1]))
    else:
        rows.sort(key=lambda r: r[1])
    text = ", ".join(f"{t} {_size(b)}" + (f" ({k} parts)" if k > 1 else "") for t, b, k in rows[:24])
    return f"its GGUF files: {text}" + (f", and {len(rows) - 24} more" if len(rows) > 24 else "")


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _gguf_parts(src: Source, repo: str, names: list[str], sizes: dict[str, Any], url, on_status, *, name: str, source: str,
                sources: tuple[str, ...], quant_id: str = "") -> LoadedModel:
    from advisor.modelfile.build import from_gguf_files
    from advisor.modelfile.gguf_file import read_gguf_stream

    files = []
    for part in names:
        what = f"{repo}/{part}"
        with src.open(url(part), what, sizes.get(part), on_status(what)) as f:
            files.append(read_gguf_stream(f, f.size, what))
        src.done(f)
    model = from_gguf_files(files, [n.rsplit("/", 1)[-1] for n in names], source=source, name=name, sources=sources)
    return _relabel(model, quant_id)


# --- the vision projector beside a GGUF, as llama-server -hf picks it --------------------------------

_LLAMA_TAG = re.compile(r"[-.]([A-Z0-9_]+)$", re.IGNORECASE)
_LLAMA_SPLIT = re.compile(r"^(.+)-([0-9]{5})-of-([0-9]{5})$", re.IGNORECASE)


def _quant_bits(path: str) -> int:
    """llama.cpp common/download.cpp extract_quant_bits: the number in a GGUF name's tag (the last `-` or
    `.` word of the name without `.gguf` and its split suffix): Q4_K_M 4, UD-Q2_K_XL 2, BF16 16, F32 32;
    0 without one."""
    prefix = path.removesuffix(".gguf")
    m = _LLAMA_SPLIT.match(prefix)
    if m:
        prefix = m.group(1)
    t = _LLAMA_TAG.search(prefix)
    digits = re.search(r"\d+", t.group(1)) if t else None
    return int(digits.group(0)[:9]) if digits else 0


def pick_mmproj(files, model: str) -> str:
    """The mmproj `llama-server -hf` loads beside the GGUF `model` (its path in the repo; the first part
    of a split set), or "" when the repo has none: llama.cpp common/download.cpp find_best_mmproj
    (find_best_sibling with the keyword "mmproj"). Candidates are the `.gguf` paths that contain "mmproj"
    (case-sensitive) in the model's folder or a folder above it; the deepest folder wins, then the
    quantization nearest the model's (|bits - model bits|: a Q4 model takes an F16 or BF16 projector
    over an F32 one, a Q8_0 projector when there is one), then the first in the listing. The Hub lists a
    tree in git's order, sorted by path, so a tie goes to the name that sorts first (mmproj-BF16.gguf
    before mmproj-F16.gguf)."""
    model_dirs = model.split("/")[:-1]
    bits = _quant_bits(model)
    best, best_depth, best_diff = "", 0, 0
    for path in sorted(files):
        if not path.endswith(".gguf") or "mmproj" not in path:
            continue
        dirs = path.split("/")[:-1]
        if dirs != model_dirs[:len(dirs)]:
            continue  # in another folder: llama.cpp only looks in the model's folder and those above it
        depth, diff = len(dirs), abs(_quant_bits(path) - bits)
        if not best or depth > best_depth or (depth == best_depth and diff < best_diff):
            best, best_depth, best_diff = path, depth, diff
    return best


def _with_mmproj(src: Source, model: LoadedModel, repo: str, first: str, sizes: dict[str, Any], url, on_status,
                 wanted: bool) -> LoadedModel:
    """`model` with the vision tower of the mmproj llama-server -hf would fetch beside `first` (its header
    only). llama.cpp fails to start when that download fails, so a failure here is the answer's too."""
    name = pick_mmproj(sizes, first) if wanted else ""
    if not name:
        return model
    what = f"{repo}/{name}"
    return _attach_projector(src, model, url(name), what, sizes.get(name), what, _NO_MMPROJ_HINT, on_status(what))


def _attach_projector(src: Source, model: LoadedModel, address: str, label: str, size: int | None, fetched: str,
                      hint: str, status=None) -> LoadedModel:
    """`model` with the vision tower of the projector GGUF at `address` (its header only); a failure to read it
    is the answer's, with `hint` (the runtime does not start without it)."""
    from advisor.modelfile.gguf_file import read_gguf_stream
    from advisor.modelfile.vision import attach, mmproj_tower, rules

    try:
        with src.open(address, label, size, status) as f:
            header = read_gguf_stream(f, f.size, label)
        src.done(f)
        tower = mmproj_tower(header, label, rules(), fetched=fetched)
    except AdvisorError as exc:
        exc.hint = "; ".join(h for h in (exc.hint, hint) if h)
        raise
    return attach(model, tower)


def _by_repo(model: LoadedModel, hf_repo: str, hf_file: str) -> LoadedModel:
    """`model` as a program that downloads by repo is given it (`-hf ORG/NAME[:TAG]`, `--hf-file`)."""
    from dataclasses import replace

    return replace(model, hf_repo=hf_repo, hf_file=hf_file)


_NO_MMPROJ_HINT = ("this is the vision projector llama-server -hf fetches with the model, and it does not start "
                   "without it; --no-mmproj answers for text only")


def _relabel(model: LoadedModel, quant_id: str) -> LoadedModel:
    """The quant named as the repo names it (`UD-Q4_K_XL`), when its file type alone would say less."""
    if not quant_id or quant_id == model.quant.id:
        return model
    from dataclasses import replace

    basis = f"{model.quant.bpw_basis}; the file's own type says {model.quant.id}"
    return replace(model, quant=replace(model.quant, id=quant_id, bpw_basis=basis))


# --- a GGUF file at any URL ------------------------------------------------------------------------

def _gguf_from_url(src: Source, ref: Ref) -> LoadedModel:
    from advisor.modelfile.build import from_gguf_files
    from advisor.modelfile.gguf_file import read_gguf_stream

    parts = urlsplit(ref.url)
    base = parts.path.rsplit("/", 1)[-1]
    m = _SPLIT.match(unquote(base))
    urls = [ref.url]
    names = [unquote(base)]
    if m:
        n = int(m["n"])
        if not 1 <= n <= limits.MAX_SPLITS:
            raise RemoteError(f"{ref.url[:200]}: split name says {n} parts", "")
        head = parts.path[: len(parts.path) - len(base)]
        names = [f"{m['stem']}-{k:05d}-of-{n:05d}.gguf" for k in range(1, n + 1)]
        urls = [parts._replace(path=head + quote(nm)).geturl() for nm in names]
    files = []
    for u, nm in zip(urls, names):
        with src.open(u, nm) as f:
            files.append(read_gguf_stream(f, f.size, nm))
        src.done(f)
    return from_gguf_files(files, names, source="gguf url", name=None, sources=(ref.url,))


# --- the Ollama library --------------------------------------------------------------------------

def ollama_registry() -> str:
    return (os.environ.get(OLLAMA_ENV) or OLLAMA_DEFAULT).rstrip("/")


def _read_ollama(ref: Ref, progress: Progress | None, mmproj: bool = True) -> LoadedModel:
    from advisor.modelfile import stores

    local = stores.find_ollama(f"{ref.name}:{ref.tag}")
    if local is not None:
        return stores.read_ollama(f"{ref.name}:{ref.tag}", mmproj=mmproj)
    parts = ref.name.split("/")
    if len(parts) == 3 and parts[0].lower() in ("hf.co", "huggingface.co"):
        # Ollama pulls hf.co/ORG/NAME[:TAG] from the Hub's GGUF files; without a tag it takes Q4_K_M
        # when the repo has it (Ollama's docs, "Use Ollama with any GGUF model on Hugging Face Hub")
        tag = "Q4_K_M" if ref.tag == "latest" else ref.tag
        return _read_hf(Ref("hf", ref.text, repo=f"{parts[1]}/{parts[2]}", tag=tag), progress, mmproj)
    if len(parts) == 3:
        raise RemoteError(f"ollama:{ref.name}:{ref.tag} is not in the local store, and only the Ollama library "
                          f"({urlsplit(OLLAMA_DEFAULT).netloc}) is read remotely", f"run `ollama pull {ref.name}:{ref.tag}`")
    namespace, model = (parts[0], parts[1]) if len(parts) == 2 else ("library", parts[0])
    registry = ollama_registry()
    key = fetch.record_key("ollama", registry, namespace, model, ref.tag)
    display = f"{ref.name}:{ref.tag}"
    try:
        from dataclasses import replace

        return replace(fetch.run(key, f"ollama:{display}",
                                 lambda src: _ollama_model(src, registry, namespace, model, ref.tag, display, mmproj),
                                 progress=progress), ollama=display)
    except RemoteError as exc:
        folder, root = stores._manifest_folder(parts)
        local = sorted(p.name for p in folder.iterdir())[:10] if folder.is_dir() else []
        if not local:
            raise
        raise RemoteError(f"ollama:{display} is not in the local store {root}, and the library: {exc.message}",
                          f"tags in the local store: {', '.join(local)}") from None


def _ollama_model(src: Source, registry: str, namespace: str, model: str, tag: str, display: str,
                  mmproj: bool = True) -> LoadedModel:
    base = f"{registry}/v2/{namespace}/{model}"
    what = f"ollama:{display}"

    def on_manifest(status: int, headers: Any) -> RemoteError:
        if status == 404:
            return RemoteError(f"{what}: not in the Ollama library (404)", _ollama_closest(base, model, tag))
        return fetch.status_error(status, what, base, headers)

    manifest = src.get_json("manifest", f"{base}/manifests/{quote(tag)}", limits.MAX_SMALL_JSON, f"{what} manifest",
                            headers={"accept": "application/vnd.docker.distribution.manifest.v2+json"},
                            on_status=on_manifest)
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    if not isinstance(layers, list):
        raise RemoteError(f"{what}: the manifest has no layers list", "the registry answered something else")
    models = [layer for layer in layers if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL]
    if len(models) != 1 or not re.fullmatch(r"sha256:[0-9a-f]{64}", str(models[0].get("digest", ""))):
        raise RemoteError(f"{what}: the manifest does not name one model layer ({OLLAMA_MODEL})", "")
    digest, size = models[0]["digest"], models[0].get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        size = None
    from advisor.modelfile.build import from_gguf_files
    from advisor.modelfile.gguf_file import read_gguf_stream

    blob = f"{base}/blobs/{digest}"
    label = f"{display} (blob {digest[7:19]}…)"
    with src.open(blob, label, size) as f:
        gguf = read_gguf_stream(f, f.size, label)
    src.done(f)
    loaded = from_gguf_files([gguf], [f"sha256-{digest[7:]}"], source="ollama library", name=display,
                             sources=(f"{registry}/{namespace}/{model}:{tag}", blob))
    projectors = [layer for layer in layers if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_PROJECTOR]
    if not mmproj or not projectors:
        return loaded
    pdigest, psize = str(projectors[0].get("digest", "")), projectors[0].get("size")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", pdigest):
        raise RemoteError(f"{what}: the manifest's projector layer has no sha256 digest", "")
    if not isinstance(psize, int) or isinstance(psize, bool) or psize <= 0:
        psize = None
    return _attach_projector(src, loaded, f"{base}/blobs/{pdigest}", f"{display} projector (blob {pdigest[7:19]}…)",
                             psize, f"{display} projector sha256-{pdigest[7:]}", _NO_PROJECTOR_HINT)


_NO_PROJECTOR_HINT = "Ollama loads this vision projector with the model; --no-mmproj answers for text only"


def _ollama_closest(base: str, model: str, tag: str) -> str:
    """The model's tags, when the registry lists them (OCI `tags/list`), nearest first."""
    try:
        raw = fetch.get_small(f"{base}/tags/list", 1 * fetch.MIB, "tags", {})
        tags = fetch.json_from(raw, base, "tags").get("tags") or []
        tags = [t for t in tags if isinstance(t, str)]
    except (AdvisorError, AttributeError):
        tags = []
    if tags:
        import difflib

        close = difflib.get_close_matches(tag, tags, n=6, cutoff=0.3) or tags[:6]
        return f"tags of {model}: {', '.join(close)}"
    return f"check the name and tag at https://ollama.com/library/{model}/tags"
