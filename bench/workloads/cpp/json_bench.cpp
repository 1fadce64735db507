// nlohmann/json: builds a generated document of records, serializes it (compact and
// indented), parses it back, walks and queries it, round-trips it through CBOR, MessagePack
// and UBJSON, and diffs and patches it. argv[1] scales the number of rounds.
#include <nlohmann/json.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using nlohmann::json;

static uint32_t seed = 12345;
static uint32_t next() {
  seed = seed * 1103515245u + 12345u;
  return seed >> 8;
}

static const char *words[] = {"pepper", "path", "edge",   "profile", "wasm",  "loop",
                              "header", "branch", "sample", "counter", "yield", "ring",
                              "tree",   "stack",  "guide",  "module",  "trap",  "frame"};

static std::string phrase(int n) {
  std::string s;
  for (int i = 0; i < n; i++) {
    if (i) s += (next() % 17 == 0) ? "\\\"" : " ";
    s += words[next() % 18];
  }
  if (next() % 9 == 0) s += " \xc3\xa9t\xc3\xa9 \xe2\x82\xac";  // some UTF-8
  return s;
}

static json make_record(int id) {
  json r;
  r["id"] = id;
  r["name"] = phrase(2 + next() % 3);
  r["score"] = (double)(next() % 100000) / 64.0 - 500.0;
  r["active"] = next() % 3 != 0;
  r["tags"] = json::array();
  for (int t = 0, nt = next() % 6; t < nt; t++) r["tags"].push_back(words[next() % 18]);
  json &pos = r["position"];
  pos["x"] = (int)(next() % 2000) - 1000;
  pos["y"] = (int)(next() % 2000) - 1000;
  pos["z"] = (double)(next() % 1000) * 0.125;
  if (next() % 4 == 0) r["note"] = nullptr;
  if (next() % 5 == 0) {
    json hist = json::array();
    for (int k = 0, nk = 3 + next() % 8; k < nk; k++) hist.push_back({{"t", k}, {"v", (int64_t)next() * 1000}});
    r["history"] = hist;
  }
  return r;
}

static uint64_t sum = 1469598103934665603ull;
static void mix(uint64_t v) { sum = (sum ^ v) * 1099511628211ull; }
static void mix_str(const std::string &s) {
  for (unsigned char c : s) mix(c);
}
static void mix_bytes(const std::vector<std::uint8_t> &b) {
  uint64_t h = 0;
  for (auto c : b) h = h * 131 + c;
  mix(h);
  mix(b.size());
}

// Walks every value of a document, counting kinds and folding numbers in.
static void walk(const json &j, std::map<std::string, int> &kinds) {
  kinds[j.type_name()]++;
  switch (j.type()) {
    case json::value_t::object:
      for (auto it = j.begin(); it != j.end(); ++it) {
        mix(it.key().size());
        walk(it.value(), kinds);
      }
      break;
    case json::value_t::array:
      for (const auto &v : j) walk(v, kinds);
      break;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      mix((uint64_t)j.get<int64_t>());
      break;
    case json::value_t::number_float:
      mix((uint64_t)(int64_t)(j.get<double>() * 1000));
      break;
    case json::value_t::string:
      mix(j.get_ref<const std::string &>().size());
      break;
    default:
      break;
  }
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
  const int records = 800;
  std::map<std::string, int> kinds;
  size_t text_bytes = 0;
  for (int r = 0; r < rounds; r++) {
    json doc;
    doc["version"] = r;
    doc["generator"] = "pepper corpus";
    json &items = doc["items"];
    for (int i = 0; i < records; i++) items.push_back(make_record(r * records + i));

    std::string compact = doc.dump();
    std::string pretty = doc.dump(2);
    text_bytes += compact.size() + pretty.size();
    json back = json::parse(compact);
    json back2 = json::parse(pretty);
    if (back != doc || back2 != doc) {
      std::printf("json: round trip failed in round %d\n", r);
      return 1;
    }
    mix_str(compact.substr(0, 256));
    mix(compact.size());
    mix(pretty.size());

    kinds.clear();
    walk(back, kinds);

    // Queries: filter, aggregate, pointers.
    double total = 0;
    int active = 0;
    std::map<std::string, int> tag_count;
    for (const auto &it : back["items"]) {
      if (it.value("active", false)) {
        active++;
        total += it["score"].get<double>();
      }
      for (const auto &t : it["tags"]) tag_count[t.get<std::string>()]++;
      if (it.contains("history")) mix(it["history"].size());
    }
    mix(active);
    mix((uint64_t)(int64_t)total);
    for (auto &kv : tag_count) mix(kv.second);
    mix(back[json::json_pointer("/items/17/position/x")].get<int64_t>());
    json flat = back["items"][3].flatten();
    mix(flat.size());
    mix(flat.unflatten() == back["items"][3]);

    // Binary formats.
    std::vector<std::uint8_t> cbor = json::to_cbor(doc);
    std::vector<std::uint8_t> msgpack = json::to_msgpack(doc);
    std::vector<std::uint8_t> ubjson = json::to_ubjson(doc);
    mix_bytes(cbor);
    mix_bytes(msgpack);
    mix_bytes(ubjson);
    if (json::from_cbor(cbor) != doc || json::from_msgpack(msgpack) != doc || json::from_ubjson(ubjson) != doc) {
      std::printf("json: binary round trip failed in round %d\n", r);
      return 1;
    }

    // Diff a modified copy and patch it back.
    json changed = doc;
    for (int k = 0; k < 40; k++) {
      json &it = changed["items"][next() % records];
      it["score"] = it["score"].get<double>() + 1.5;
      it["tags"].push_back("changed");
    }
    changed["items"].erase(changed["items"].begin() + 5);
    json patch = json::diff(doc, changed);
    mix(patch.size());
    if (doc.patch(patch) != changed) {
      std::printf("json: patch failed in round %d\n", r);
      return 1;
    }
  }
  std::printf("json: %d rounds of %d records, %zu bytes of text;", rounds, records, text_bytes);
  for (auto &kv : kinds) std::printf(" %s=%d", kv.first.c_str(), kv.second);
  std::printf("; checksum %016llx\n", (unsigned long long)sum);
  return 0;
}
