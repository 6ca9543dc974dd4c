"""A read-only npm registry on 127.0.0.1 serving the packed tarballs of one directory (scripts/dist-test.sh uses it
to install dist/npm/*.tgz with `npm install -g` and `npx -y` exactly as from a real registry, optional dependencies
resolved by npm itself). Prints its URL on the first line of stdout, then serves until killed.

    npm_registry.py DIR
"""

import base64
import hashlib
import http.server
import json
import os
import sys
import tarfile
import urllib.parse

root = sys.argv[1]
packuments = {}
tarballs = {}
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), None)
base = f"http://127.0.0.1:{server.server_address[1]}"

for file in sorted(os.listdir(root)):
    if not file.endswith(".tgz"):
        continue
    path = os.path.join(root, file)
    with open(path, "rb") as f:
        data = f.read()
    with tarfile.open(path) as t:
        manifest = json.load(t.extractfile("package/package.json"))
    name, version = manifest["name"], manifest["version"]
    tarballs[file] = data
    manifest["dist"] = {
        "tarball": f"{base}/-/{file}",
        "shasum": hashlib.sha1(data).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
    }
    doc = packuments.setdefault(name, {"name": name, "versions": {}, "dist-tags": {}})
    doc["versions"][version] = manifest
    doc["dist-tags"]["latest"] = version


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = urllib.parse.unquote(self.path.split("?")[0]).lstrip("/")
        if path.startswith("-/") and path[2:] in tarballs:
            body, kind = tarballs[path[2:]], "application/octet-stream"
        elif path in packuments:
            body, kind = json.dumps(packuments[path]).encode(), "application/json"
        else:
            self.send_error(404, f"{path} is not in this registry")
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server.RequestHandlerClass = Handler
print(base + "/", flush=True)
server.serve_forever()
