# Link rules the build enforces: a library that must stay free of a
# dependency (the schedule engine and planner never link gRPC or LibTorch)
# names it here, and configuring fails with the chain of links that pulls it
# in, so the rule cannot rot silently.
#
#   chimera_forbid_links(chimera_schedule "gRPC::|grpc" "torch|c10")
#   ...
#   chimera_check_link_rules()   # once, after every target is defined

# Records that `target` must never link, directly or through any library it
# links, an item matching one of the regular expressions after it.
function(chimera_forbid_links target)
  set_property(GLOBAL APPEND PROPERTY CHIMERA_LINK_RULES "${target}")
  set_property(GLOBAL PROPERTY "CHIMERA_FORBIDDEN_${target}" "${ARGN}")
endfunction()

# The library a link item names, without the generator expressions CMake
# wraps around transitive items ($<LINK_ONLY:x>, ::@(directory-id)).
function(_chimera_link_item_name item out)
  string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
  string(REGEX REPLACE "^::@\\(.*\\);?" "" item "${item}")
  set(${out} "${item}" PARENT_SCOPE)
endfunction()

# Walks the link graph below `target` depth first; `chain` is how it got
# there, `visited_var` names the list of targets already walked.
function(_chimera_walk_links target forbidden chain visited_var)
  set(visited ${${visited_var}})
  if(target IN_LIST visited)
    return()
  endif()
  list(APPEND visited "${target}")
  set(${visited_var} ${visited} PARENT_SCOPE)
  get_target_property(type ${target} TYPE)
  set(items)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(direct ${target} LINK_LIBRARIES)
    if(direct)
      list(APPEND items ${direct})
    endif()
  endif()
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(interface)
    list(APPEND items ${interface})
  endif()
  foreach(raw IN LISTS items)
    _chimera_link_item_name("${raw}" item)
    foreach(pattern IN LISTS forbidden)
      if(item MATCHES "${pattern}")
        message(FATAL_ERROR
          "link rule broken: ${chain} -> ${item} matches the forbidden '${pattern}'")
      endif()
    endforeach()
    if(TARGET "${item}")
      _chimera_walk_links("${item}" "${forbidden}" "${chain} -> ${item}" visited)
    endif()
  endforeach()
  set(${visited_var} ${visited} PARENT_SCOPE)
endfunction()

# Checks every rule recorded with chimera_forbid_links.
function(chimera_check_link_rules)
  get_property(targets GLOBAL PROPERTY CHIMERA_LINK_RULES)
  foreach(target IN LISTS targets)
    get_property(forbidden GLOBAL PROPERTY "CHIMERA_FORBIDDEN_${target}")
    set(visited)
    _chimera_walk_links(${target} "${forbidden}" ${target} visited)
  endforeach()
endfunction()
