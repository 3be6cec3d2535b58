// fmt's out-of-line part, compiled once for all of shoal: the target shoal_fmt (src/CMakeLists.txt) holds
// this file and gives its users fmt's headers in their compiled mode (no FMT_HEADER_ONLY).
//
// format-inl.h defines the functions fmt's headers declare FMT_API. The templates below are the ones the
// headers declare but define only in format-inl.h, for the types shoal formats with (char, std::locale).
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl<char>(locale_ref loc) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref loc) -> char;

}  // namespace detail
FMT_END_NAMESPACE
