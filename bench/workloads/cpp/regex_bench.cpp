// A log analyzer built on libc++'s std::regex templates (ECMAScript and POSIX extended
// grammars, captures, icase, regex_replace, regex_iterator) and its containers: generates
// access-log lines, parses each with a capturing pattern, aggregates by status, path and
// host in ordered and unordered maps, finds addresses, redacts e-mails, sorts the results.
// argv[1] is the number of generated lines in thousands.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

static uint32_t seed = 2024;
static uint32_t next() {
  seed = seed * 1664525u + 1013904223u;
  return seed >> 8;
}

static const char *methods[] = {"GET", "GET", "GET", "POST", "PUT", "DELETE", "HEAD"};
static const char *sections[] = {"api", "static", "users", "items", "search", "admin", "img"};
static const char *names[] = {"ada", "bob", "carol", "dave", "eve", "frank", "grace", "heidi"};
static const char *agents[] = {"Mozilla/5.0 (X11; Linux x86_64)", "curl/8.1.2",
                               "Wget/1.21", "python-requests/2.31", "Pepper-Bot/0.1"};
static const int statuses[] = {200, 200, 200, 200, 301, 304, 404, 404, 500, 503};

static std::string make_line(int i) {
  char buf[512];
  int day = 1 + i / 40000 % 28, h = next() % 24, m = next() % 60, s = next() % 60;
  std::string path = "/";
  path += sections[next() % 7];
  for (int d = 0, nd = next() % 3; d < nd; d++) path += "/" + std::to_string(next() % 1000);
  if (next() % 3 == 0) path += "?q=" + std::string(names[next() % 8]) + "&page=" + std::to_string(next() % 20);
  std::string extra;
  if (next() % 7 == 0) extra = std::string(" from=") + names[next() % 8] + "@example.org";
  std::snprintf(buf, sizeof buf,
                "10.%u.%u.%u - %s [2024-03-%02dT%02d:%02d:%02dZ] \"%s %s HTTP/1.1\" %d %u %u.%03us \"%s\"%s",
                next() % 4, next() % 256, next() % 256, names[next() % 8], day, h, m, s,
                methods[next() % 7], path.c_str(), statuses[next() % 10], next() % 50000,
                next() % 3, next() % 1000, agents[next() % 5], extra.c_str());
  return buf;
}

static uint64_t sum = 1469598103934665603ull;
static void mix(uint64_t v) { sum = (sum ^ v) * 1099511628211ull; }
static void mix_str(const std::string &s) {
  for (unsigned char c : s) mix(c);
}

int main(int argc, char **argv) {
  int thousands = argc > 1 ? std::atoi(argv[1]) : 1;
  int lines = thousands * 1000;

  const std::regex line_re(
      R"re(^(\d+\.\d+\.\d+\.\d+) - (\w+) \[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z\] "([A-Z]+) ([^ ?"]+)(\?[^ "]*)? HTTP/1\.[01]" (\d{3}) (\d+) (\d+\.\d+)s "([^"]*)"(.*)$)re");
  const std::regex email_re(R"(([a-z]+)@([a-z]+\.[a-z]+))");
  const std::regex number_re(R"(/(\d+))");
  const std::regex bot_re("bot|curl|wget", std::regex::icase);
  const std::regex query_re(R"([?&]([a-z]+)=([^&]*))");
  const std::regex posix_re("(GET|HEAD) /(api|items)(/[0-9]+)+", std::regex::extended);

  std::map<int, int> by_status;
  std::unordered_map<std::string, uint64_t> bytes_by_user;
  std::unordered_map<std::string, int> by_section;
  std::map<std::string, int> query_keys;
  std::set<std::string> subnets;
  std::vector<std::pair<double, int>> slow;
  int bots = 0, posix_hits = 0, numbers = 0, bad = 0;
  std::string redacted_sample;

  for (int i = 0; i < lines; i++) {
    std::string line = make_line(i);
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) {
      bad++;
      continue;
    }
    int status = std::atoi(m[12].str().c_str());
    by_status[status]++;
    bytes_by_user[m[2].str()] += std::strtoull(m[13].str().c_str(), nullptr, 10);
    std::string path = m[10].str();
    by_section[path.substr(0, path.find('/', 1))]++;
    subnets.insert(m[1].str().substr(0, m[1].str().rfind('.')));
    double secs = std::strtod(m[14].str().c_str(), nullptr);
    if (secs > 2.9) slow.emplace_back(secs, i);

    for (std::sregex_iterator it(path.begin(), path.end(), number_re), end; it != end; ++it) {
      numbers++;
      mix(std::atoi((*it)[1].str().c_str()));
    }
    if (m[11].matched) {
      std::string q = m[11].str();
      for (std::sregex_iterator it(q.begin(), q.end(), query_re), end; it != end; ++it) query_keys[(*it)[1].str()]++;
    }
    if (std::regex_search(m[15].first, m[15].second, bot_re)) bots++;
    if (std::regex_search(line, posix_re)) posix_hits++;
    if (m[16].length() > 0) {
      std::string r = std::regex_replace(line, email_re, "<$1 at $2>");
      mix_str(r.substr(r.size() - 24));
      if (redacted_sample.empty()) redacted_sample = r.substr(r.find(" from=") + 1);
    }
  }

  std::vector<std::pair<std::string, uint64_t>> users(bytes_by_user.begin(), bytes_by_user.end());
  std::sort(users.begin(), users.end(), [](auto &a, auto &b) { return a.second > b.second || (a.second == b.second && a.first < b.first); });
  std::sort(slow.begin(), slow.end(), [](auto &a, auto &b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<std::pair<std::string, int>> sections_sorted(by_section.begin(), by_section.end());
  std::sort(sections_sorted.begin(), sections_sorted.end());

  for (auto &kv : by_status) { mix(kv.first); mix(kv.second); }
  for (auto &u : users) { mix_str(u.first); mix(u.second); }
  for (auto &s : sections_sorted) { mix_str(s.first); mix(s.second); }
  for (auto &q : query_keys) { mix_str(q.first); mix(q.second); }
  for (size_t k = 0; k < slow.size() && k < 50; k++) mix(slow[k].second);
  mix(subnets.size());

  std::printf("regex: %d lines, %d unparsed, statuses", lines, bad);
  for (auto &kv : by_status) std::printf(" %d:%d", kv.first, kv.second);
  std::printf("; top user %s; %d bots, %d posix hits, %d ids, %zu subnets, %zu slow; %s; checksum %016llx\n",
              users.empty() ? "-" : users[0].first.c_str(), bots, posix_hits, numbers, subnets.size(),
              slow.size(), redacted_sample.c_str(), (unsigned long long)sum);
  return bad == 0 ? 0 : 1;
}
