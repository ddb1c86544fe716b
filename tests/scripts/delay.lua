-- A pause of 20 ms before every request.
function delay()
  return 20
end
