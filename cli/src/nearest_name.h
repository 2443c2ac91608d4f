// NearestName: the suggestion an unknown flag or subcommand gets ("did you
// mean --tp?"). Pure: the candidates come from the caller (main reads them
// from the command line parser), the choice is the least edit distance.
#pragma once

#include <string>
#include <vector>

namespace seam::cli {

// Levenshtein distance (insertions, deletions, substitutions) between `a` and `b`.
int EditDistance(const std::string& a, const std::string& b);

// The candidate nearest to `word`: the least edit distance, ties to the
// earlier candidate, or one that starts with `word` (a prefix typed short,
// "serv" for "serve"). "" when none is within a third of the longer name
// (at least 2 edits allowed), so that a wild guess gets no suggestion.
std::string NearestName(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace seam::cli
